"""/server_info's launch_command as SGLang 0.5.23 builds it (srt/server_args.py:711-719,
srt/sampling/watermarking/core.py:110-134): the arguments joined, only a watermark config
redacted; the simulator's own flags are left out."""

from __future__ import annotations

from console.sim.state import launch_command


def test_bare_arguments_keys_in_clear_watermark_redacted():
    argv = (
        "--model-path",
        "m",
        "--sim-speed",
        "5",
        "--api-key",
        "k1",
        "--watermark-config",
        '{"key": 1}',
        "--sim-fault=hang",
        "--watermark-config={}",
    )
    assert launch_command(argv) == (
        "--model-path m --api-key k1 --watermark-config <redacted> --watermark-config=<redacted>"
    )
