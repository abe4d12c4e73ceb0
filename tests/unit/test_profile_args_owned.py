"""What the plan owns stays the plan's (F8), a bind address is an address (F15), and one
redaction policy masks secret-named variables and URL passwords in every plan view (F2, F19)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.core.redact import MASK, redact_env, redact_text, secret_values
from console.hw.simulated import SimulatedGpuBackend
from console.profiles.flagcheck import resolve_long_option, sglang_long_options
from console.topology.discover import discover
from console.topology.model import Topology
from tests.conftest import REPO


def simulated_topology() -> Topology:
    backend = SimulatedGpuBackend(None)
    return discover(backend, backend.numa_nodes)


GOOD = (REPO / "profiles" / "qwen3.6-27b.toml").read_text()
ARGS_LINE = 'args = [\n    "--trust-remote-code"'


def with_args(*extra: str, where: str = "server") -> str:
    quoted = ", ".join(json.dumps(a) for a in extra)
    if where == "server":
        return GOOD.replace(ARGS_LINE, f'args = [\n    {quoted}, "--trust-remote-code"', 1)
    return GOOD.replace("[variants.off]\n", f"[variants.off]\nargs = [{quoted}]\n", 1)


# (args in the profile, the spelling the message quotes, the field it names)
OWNED = [
    (["--port", "31999"], "--port", "server.port"),
    (["--port=31999"], "--port", "server.port"),
    (["--po", "31999"], "--po (taken by SGLang as --port)", "server.port"),
    (["--host", "0.0.0.0"], "--host", "server.host"),
    (["--ho=0.0.0.0"], "--ho (taken by SGLang as --host)", "server.host"),
    (["--tp-size", "2"], "--tp-size", "layouts.NAME.tp"),
    (["--tp", "2"], "--tp (taken by SGLang as --tp-size)", "layouts.NAME.tp"),
    (["--tensor-parallel-size=2"], "--tensor-parallel-size", "layouts.NAME.tp"),
    (["--dp-size", "2"], "--dp-size", "layouts.NAME.dp"),
    (["--dp=2"], "--dp (taken by SGLang as --dp-size)", "layouts.NAME.dp"),
    (["--base-gpu-id", "4"], "--base-gpu-id", "layouts.NAME.gpus"),
    (["--model-path", "other/model"], "--model-path", "model.path"),
    (["--model", "other/model"], "--model", "model.path"),
    (["--served-model-name", "x"], "--served-model-name", "model.served_name"),
    (["--served", "x"], "--served (taken by SGLang as --served-model-name)", "model.served_name"),
]


@pytest.mark.parametrize("where", ["server", "variant"])
@pytest.mark.parametrize(("args", "spelled", "field"), OWNED, ids=[" ".join(o[0]) for o in OWNED])
def test_args_cannot_override_what_the_plan_owns(
    cli, user_profiles: Path, where: str, args: list[str], spelled: str, field: str
) -> None:
    path = user_profiles / "qwen3.6-27b.toml"
    path.write_text(with_args(*args, where=where))
    result = cli("plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "off", "--demo")
    assert result.code == 2, result.out
    (line,) = result.err.strip().splitlines()
    key = "server.args" if where == "server" else "variants.off.args"
    assert f"{path}: {key}: {spelled} is set by the plan; set " in line
    assert field in line
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    "spelling", ["--api-k", "--admin-api-key=sekret-value", "--api-key=sekret"]
)
def test_a_key_in_args_is_refused_under_any_spelling(cli, user_profiles: Path, spelling: str):
    path = user_profiles / "qwen3.6-27b.toml"
    path.write_text(with_args(*spelling.split(" "), "sekret-value"))
    result = cli("plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "off", "--demo")
    assert result.code == 2
    assert "must not be written in a profile" in result.err
    assert "api_key_env" in result.err
    assert "sekret" not in result.err


def test_flags_that_only_look_owned_pass(cli, user_profiles: Path) -> None:
    """`--mod` is ambiguous (SGLang refuses it itself), `--ssl-keyfile` and `--port-...` are
    other options; `--enable-metrics` twice is harmless."""
    path = user_profiles / "qwen3.6-27b.toml"
    path.write_text(with_args("--mem-fraction-static", "0.8", "--model-impl", "sglang"))
    result = cli("plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "off", "--demo")
    assert result.code == 0, result.err
    assert resolve_long_option("--mod", ["--model-path", "--model"]) is None
    assert resolve_long_option("--model-impl", ["--model-path", "--model"]) is None
    assert resolve_long_option("--tp=2", ["--tp-size"]) == "--tp-size"
    assert "--tp-size" in sglang_long_options()
    assert len(sglang_long_options()) > 400  # the real parser's table was read


def test_the_gpu_list_cannot_be_set_in_env(cli, user_profiles: Path) -> None:
    path = user_profiles / "qwen3.6-27b.toml"
    path.write_text(GOOD.replace('NCCL_IB_DISABLE = "1"', 'CUDA_VISIBLE_DEVICES = "5"'))
    result = cli("plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "off", "--demo")
    assert result.code == 2
    (line,) = result.err.strip().splitlines()
    assert f"{path}: server.env: CUDA_VISIBLE_DEVICES is set by the plan" in line
    assert "layouts.NAME.gpus" in line


@pytest.mark.parametrize("host", ["127.0.0.1; rm -rf /", "a b", "-x", "host/x", "$(id)"])
def test_a_host_that_is_no_address_is_refused(cli, user_profiles: Path, host: str) -> None:
    path = user_profiles / "qwen3.6-27b.toml"
    path.write_text(GOOD.replace('host = "127.0.0.1"', f"host = {json.dumps(host)}"))
    result = cli("plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "off", "--demo")
    assert result.code == 2
    (line,) = result.err.strip().splitlines()
    assert f"{path}: server.host: " in line
    assert "is not an IP address or host name" in line


@pytest.mark.parametrize(
    ("host", "key_env", "warned"),
    [
        ("0.0.0.0", None, True),
        ("::", None, True),
        ("my-host.example", None, True),
        ("127.0.0.1", None, False),
        ("localhost", None, False),
        ("::1", None, False),
        ("0.0.0.0", "MY_KEY", False),
    ],
)
def test_a_server_open_to_the_network_without_a_key_is_warned_about(
    cli, user_profiles: Path, host: str, key_env: str | None, warned: bool
) -> None:
    text = GOOD.replace('host = "127.0.0.1"', f"host = {json.dumps(host)}")
    if key_env:
        text = text.replace("[server]\n", f'[server]\napi_key_env = "{key_env}"\n', 1)
    (user_profiles / "qwen3.6-27b.toml").write_text(text)
    result = cli("plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "off", "--demo", "--json")
    assert result.code == 0, result.err
    codes = [w["code"] for w in json.loads(result.out)["warnings"]]
    assert ("exposed-without-key" in codes) is warned
    shown = cli("plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "off", "--demo")
    assert ("without an API key" in shown.out) is warned


def test_the_launch_dialog_shows_the_warning_and_no_secret(user_profiles: Path) -> None:
    from rich.console import Console

    from console.profiles.command import build_command
    from console.profiles.loader import load_profile_file
    from console.topology.placement import resolve
    from console.tui.screens.launch import plan_view

    path = user_profiles / "p.toml"
    path.write_text(
        GOOD.replace('host = "127.0.0.1"', 'host = "0.0.0.0"').replace(
            'NCCL_IB_DISABLE = "1"', 'HF_TOKEN = "hf_plannedSECRET1"\nU = "https://u:PW9x@h/"'
        )
    )
    plan = resolve(
        build_command(load_profile_file(path), "tp1", "off", demo=True),
        simulated_topology(),
        port_checker=None,
    )
    console = Console(width=200, record=True)
    console.print(plan_view(plan, "ok"))
    text = console.export_text()
    assert "without an API key" in text
    assert "hf_plannedSECRET1" not in text
    assert "PW9x" not in text
    assert f"HF_TOKEN={MASK}" in text
    assert f"https://u:{MASK}@h/" in text
    assert plan.env["HF_TOKEN"] == "hf_plannedSECRET1"  # the real value is still launched


def test_the_policy() -> None:
    assert redact_env(
        {
            "HF_TOKEN": "hf_x1",
            "WANDB_API_KEY": "w",
            "N_TOKENS": "5",
            "A_KEY": "1",
            "PIN_KEY": "4711",
        }
    ) == {"HF_TOKEN": MASK, "WANDB_API_KEY": MASK, "N_TOKENS": "5", "A_KEY": "1", "PIN_KEY": MASK}
    assert redact_env({"PROXY": "http://me:pa55word@proxy:3128"}) == {
        "PROXY": f"http://me:{MASK}@proxy:3128"
    }
    line = "ddconsole: launching x: CUSTOM_URL=https://user:PLAIN42@example.invalid/x"
    assert (
        redact_text(line)
        == f"ddconsole: launching x: CUSTOM_URL=https://user:{MASK}@example.invalid/x"
    )
    assert redact_text("http://host:8080/x https://user@host/") == (
        "http://host:8080/x https://user@host/"
    )
    assert "PLAIN42" in secret_values({"CUSTOM_URL": "https://user:PLAIN42@h"})


def test_a_plan_relaunched_from_its_record_gets_its_secrets_back(user_profiles: Path) -> None:
    """Records hold `***`; `restart` launches a plan rebuilt from one: the values come back
    from the profile file, and a variable it no longer has is left out, never sent as `***`."""
    from console.profiles.command import build_command
    from console.profiles.loader import load_profile_file
    from console.topology.placement import Plan, resolve

    path = user_profiles / "p.toml"
    path.write_text(
        with_args("--ssl-keyfile-password", "kfPW77").replace(
            'NCCL_IB_DISABLE = "1"', 'HF_TOKEN = "hf_relaunchSECRET"\nU = "https://u:PW9x@h/"'
        )
    )
    plan = resolve(
        build_command(load_profile_file(path), "tp1", "off", demo=True),
        simulated_topology(),
        port_checker=None,
    )
    saved = json.dumps(plan.to_json())
    assert "hf_relaunchSECRET" not in saved
    assert "PW9x" not in saved
    assert "kfPW77" not in saved
    assert "hf_relaunchSECRET" not in plan.command_line
    rebuilt = Plan.from_json(json.loads(saved))
    assert rebuilt.env["HF_TOKEN"] == MASK
    again = rebuilt.with_secrets()
    assert again.env["HF_TOKEN"] == "hf_relaunchSECRET"
    assert again.env["U"] == "https://u:PW9x@h/"
    assert again.argv == plan.argv
    assert "kfPW77" in again.argv  # a flag's masked value comes back beside its flag
    path.write_text(GOOD)
    gone = rebuilt.with_secrets()
    assert "HF_TOKEN" not in gone.env
    assert "U" not in gone.env


def test_up_warns_before_launching_an_exposed_server(cli, user_profiles: Path) -> None:
    """The warning comes first; the launch is then refused here because the port given with
    --port is held (nothing starts; without --port, `up` would move to a free one)."""
    import socket

    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        text = GOOD.replace('host = "127.0.0.1"', 'host = "0.0.0.0"')
        (user_profiles / "qwen3.6-27b.toml").write_text(
            text.replace("port = 30000", f"port = {port}")
        )
        result = cli(
            "up",
            "qwen3.6-27b",
            "--layout",
            "tp1",
            "--variant",
            "off",
            "--port",
            str(port),
            "--demo",
        )
    assert result.code != 0
    first = result.err.strip().splitlines()[0]
    assert first.startswith("ddconsole: warning: the server listens on 0.0.0.0:")
    assert "without an API key" in first
