"""A campaign cell moves off what other servers hold, as `ddconsole up` does, and says so:
the next free port, and on the demo's simulated host free GPUs of the same count (issue 18;
a trial's pick-cells campaign failed at once because a demo server held GPU 0 and its port).
Real demo servers and a real campaign runner; free ports."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli_subprocess


@pytest.mark.slow
def test_a_campaign_cell_moves_off_a_running_servers_gpu_and_port(
    free_port_profiles: dict[str, int], tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    up = run_cli_subprocess("up", "qwen3.6-27b", "--layout", "tp1", "--json", "--demo", timeout=90)
    assert up.returncode == 0, up.stderr
    holder = json.loads(up.stdout)
    assert holder["gpus"] == [0]
    spec = tmp_path / "beside.toml"
    spec.write_text(
        'name = "beside"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\nvariants = ["off"]\n'
        "concurrency = [1]\nrequests = 2\ninput_len = 32\noutput_len = 16\n"
    )
    try:
        ran = run_cli_subprocess("campaign", str(spec), "--demo", timeout=240)
        said = ran.stdout + ran.stderr
        assert ran.returncode == 0, said[-3000:]
        port = free_port_profiles["qwen3.6-27b"]
        assert (
            f"port {port} is promised to managed server {holder['id']} (ready); using port" in said
        )
        assert f"GPUs 0 are held by {holder['id']}; using GPUs 1" in said
        # The server the campaign measured was the cell's own, and the holder still runs.
        listed = json.loads(run_cli_subprocess("ps", "--json", "--demo").stdout)
        states = {s["id"]: s["state"] for s in listed}
        assert states[holder["id"]] == "ready"
    finally:
        run_cli_subprocess("down", "--all", "--grace", "2", "--demo")
