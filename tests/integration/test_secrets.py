"""One redaction policy, every writer and view (issue 17, F2/F19): secrets planted in a
profile's `[server.env]`, a variant's env table, a URL's password and `api_key_env` appear in
no file a launch, a benchmark, a campaign, a snapshot or a recording writes, in no command's
output, in the Servers screen and in no other process's command line, while the server
still gets the real values (also after `restart`, which relaunches from the masked record)."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from console.cli.services import Services
from console.core.redact import MASK
from console.tui.app import ConsoleApp
from console.tui.screens.servers import server_detail
from console.tui.views import ServerView
from tests.conftest import REPO, shipped_profile_on_port
from tests.tui.conftest import settle, until

API_KEY = "sk-APIKEYSECRET-7f3a9c0d1e2f"
HF = "hf_PROFILEENVSECRET123"
WANDB = "wandb_VARIANTSECRET77"
URL_PASSWORD = "PLAINPASSWORD42"
ALL_SECRETS = (API_KEY, HF, WANDB, URL_PASSWORD)


def dd(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def text_of(path: Path) -> str:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            pass  # a recording still being written: its raw bytes are searched
    return data.decode(errors="replace")


def leaks(texts: dict[str, str], secrets: tuple[str, ...] = ALL_SECRETS) -> list[str]:
    return [
        f"{secret} in {where}"
        for where, text in texts.items()
        for secret in secrets
        if secret in text
    ]


def collect(outputs: dict[str, str], folder: Path, skip: str = "") -> None:
    for path in folder.rglob("*"):
        if path.is_file() and skip not in path.parts:
            outputs[str(path)] = text_of(path)


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


@pytest.fixture
def secret_profile(user_profiles: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    text = shipped_profile_on_port("qwen3.6-27b")
    text = text.replace("[server]\n", '[server]\napi_key_env = "DDTEST_SECRET_KEY"\n', 1)
    text = text.replace(
        'NCCL_IB_DISABLE = "1"\n',
        f'NCCL_IB_DISABLE = "1"\nHF_TOKEN = "{HF}"\n'
        f'CUSTOM_URL = "https://user:{URL_PASSWORD}@example.invalid/x"\n',
        1,
    )
    text = text.replace(
        "[variants.off]\n", f'[variants.off]\nenv = {{ WANDB_API_KEY = "{WANDB}" }}\n', 1
    )
    (user_profiles / "sec.toml").write_text(text)
    monkeypatch.setenv("DDTEST_SECRET_KEY", API_KEY)
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    return "sec"


@pytest.mark.slow
def test_no_planted_secret_is_written_or_shown(
    secret_profile: str, isolated_dirs: Path, tmp_path: Path
) -> None:
    outputs: dict[str, str] = {}
    ps_lines: list[str] = []
    pick = ("--layout", "tp1", "--variant", "off", "--demo")
    for form in ((), ("--json",)):
        planned = dd("plan", secret_profile, *pick, *form)
        assert planned.returncode == 0, planned.stderr
        outputs[f"plan {form}"] = planned.stdout + planned.stderr
    shown = dd("profiles", "show", secret_profile, "--demo", "--json")
    outputs["profiles show --json"] = shown.stdout + shown.stderr
    try:
        up = dd("up", secret_profile, *pick, "--json", "--timeout", "90")
        assert up.returncode == 0, up.stderr
        outputs["up"] = up.stdout + up.stderr
        server = json.loads(up.stdout)
        # The real values reach the server (and only its environment).
        with httpx.Client(timeout=10) as client:  # the server requires the real key
            assert client.get(f"{server['url']}/v1/models").status_code == 401
            bearer = {"Authorization": f"Bearer {API_KEY}"}
            assert client.get(f"{server['url']}/v1/models", headers=bearer).status_code == 200
        env = environ_of(int(server["pid"]))
        assert env["HF_TOKEN"] == HF
        assert env["WANDB_API_KEY"] == WANDB
        assert env["CUSTOM_URL"] == f"https://user:{URL_PASSWORD}@example.invalid/x"
        ps_lines += dd_ps_args()

        bench = dd(
            "bench",
            "--server",
            server["id"],
            *("--requests", "2", "--concurrency", "1", "--output-len", "16", "--json"),
            "--demo",
        )
        assert bench.returncode == 0, bench.stderr[-2000:]
        outputs["bench"] = bench.stdout + bench.stderr
        record = dd("record", "--duration", "2", "--out", str(tmp_path / "rec.ddrec.gz"), "--demo")
        assert record.returncode == 0, record.stderr
        outputs["record"] = record.stdout + record.stderr
        snap = dd("snapshot", "--demo", "--out", str(tmp_path / "snap"), "--format", "json,md")
        assert snap.returncode == 0, snap.stderr
        outputs["snapshot"] = snap.stdout + snap.stderr
        for verb in (("ps", "--json"), ("logs", server["id"], "-n", "400")):
            result = dd(*verb, "--demo")
            outputs[" ".join(verb)] = result.stdout + result.stderr
        # The TUI: its Logs and Servers screens as drawn, and its session recording.
        outputs.update(asyncio.run(tui_views(tmp_path / "tui-recordings")))

        # The Servers screen's detail, for this record and for one written in clear (by an
        # older ddconsole): masked either way.
        listing = json.loads(dd("ps", "--json", "--demo").stdout)
        view = next(s for s in listing if s["id"] == server["id"])
        plan = json.loads(dd("plan", secret_profile, *pick, "--json").stdout)
        clear = {**plan, "env": {"HF_TOKEN": HF, "CUSTOM_URL": f"https://u:{URL_PASSWORD}@h"}}
        for label, shown_plan in (("record", plan), ("clear", clear)):
            console = Console(width=300, record=True)
            console.print(server_detail(ServerView.from_json({**view, "plan": shown_plan})))
            outputs[f"servers screen ({label})"] = console.export_text()
        assert f"HF_TOKEN={MASK}" in outputs["servers screen (clear)"]

        # `restart` relaunches the plan from its record, where the secrets are `***`: the
        # server gets the real values back from the profile.
        restarted = dd("restart", server["id"], "--demo", "--json", "--timeout", "90")
        assert restarted.returncode == 0, restarted.stderr
        env = environ_of(int(json.loads(restarted.stdout)["pid"]))
        assert env["HF_TOKEN"] == HF
        assert env["CUSTOM_URL"] == f"https://user:{URL_PASSWORD}@example.invalid/x"
        ps_lines += dd_ps_args()
        collect(outputs, isolated_dirs / "xdg_state_home")  # server records live until `down`
    finally:
        dd("down", "--all", "--grace", "2", "--demo")

    campaign = tmp_path / "c.toml"
    campaign.write_text(
        f'name = "sec"\nprofile = "{secret_profile}"\nlayouts = ["tp1"]\nvariants = ["off"]\n'
        "concurrency = [1]\nrequests = 2\ninput_len = 32\noutput_len = 16\n"
    )
    try:
        ran = dd("campaign", str(campaign), "--demo", "--json", timeout=240)
        assert ran.returncode == 0, ran.stderr[-2000:]
        outputs["campaign"] = ran.stdout + ran.stderr
    finally:
        dd("down", "--all", "--grace", "2", "--demo")

    collect(outputs, isolated_dirs / "xdg_state_home")
    collect(outputs, tmp_path, skip="xdg_config_home")  # not the profile itself
    names = "\n".join(outputs)
    for kind in ("run.json", ".log", "servers/sec-tp1-1.json", ".ddrec.gz", "snapshot.json"):
        assert kind in names, f"nothing written like {kind}"
    assert any("cells" in text and "WANDB_API_KEY" in text for text in outputs.values())
    assert leaks(outputs) == []
    # F6: the key reaches SGLang through a `--config` pipe, not its command line (`ps -ww`:
    # whole lines, the --config comes after the long bucket lists).
    assert leaks({"ps -eo args": "\n".join(ps_lines)}) == []
    assert any("console.sim" in line and "--config" in line for line in ps_lines)


async def tui_views(recordings: Path) -> dict[str, str]:
    """The console on this host (demo state), recording its session into `recordings`: the
    Logs screen's lines once the launch line is in, and the Servers screen as drawn."""
    services = Services.create(demo=True)
    app = ConsoleApp(services.live_backend(recordings=recordings), mode="logs")
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        logs = app.screen
        await until(
            pilot,
            lambda: any("launching" in line for line in logs.lines),  # type: ignore[attr-defined]
            30,
            "the launch line in the Logs screen",
        )
        shown_logs = "\n".join(logs.lines)  # type: ignore[attr-defined]
        await app.action_mode("servers")
        await settle(pilot)
        servers_svg = app.export_screenshot()
    assert "launching" in shown_logs
    # The secret-named variables are on show (masked), so a leak would be seen here.
    assert "HF_TOKEN" in shown_logs
    assert "CUSTOM_URL" in shown_logs
    assert "HF_TOKEN" in servers_svg
    assert any(recordings.glob("*.ddrec.gz"))
    return {"tui logs screen": shown_logs, "tui servers screen": servers_svg}


def dd_ps_args() -> list[str]:
    return subprocess.run(
        ["ps", "-ww", "-eo", "args"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
