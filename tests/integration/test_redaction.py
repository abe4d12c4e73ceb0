"""An API key from a profile's env var never leaves: not in snapshots, log views, run
directories, recordings or state files, while the server really requires it."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import httpx
import pytest

from console.cli.services import Services
from console.tui.app import ConsoleApp
from tests.conftest import REPO, run_cli_subprocess
from tests.tui.conftest import settle, until

KEY = "sk-ddtest-7f3c9a1e5b2d4c6f"
pytestmark = pytest.mark.slow


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def content(path: Path) -> str:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    return data.decode(errors="replace")


@pytest.fixture
def keyed_profile(user_profiles: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    text = (REPO / "profiles" / "qwen3.6-27b.toml").read_text()
    text = text.replace("[server]\n", '[server]\napi_key_env = "DDCONSOLE_TEST_KEY"\n', 1)
    (user_profiles / "qwen-keyed.toml").write_text(text)
    monkeypatch.setenv("DDCONSOLE_TEST_KEY", KEY)
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    return "qwen-keyed"


async def test_the_key_is_in_no_output(keyed_profile: str, tmp_path: Path):
    env = os.environ.copy()
    up = run_cli_subprocess(
        "--demo",
        "up",
        keyed_profile,
        "--layout",
        "tp1",
        "--variant",
        "off",
        "--json",
        env=env,
        timeout=90,
    )
    assert up.returncode == 0, up.stderr
    server = json.loads(up.stdout)
    try:
        url = server["url"]
        async with httpx.AsyncClient(timeout=5) as client:
            assert (await client.get(f"{url}/v1/models")).status_code == 401
            authorized = await client.get(
                f"{url}/v1/models", headers={"Authorization": f"Bearer {KEY}"}
            )
        assert authorized.status_code == 200
        # SGLang prints its arguments, key included, into its log: the console must not.
        log = Path(server["log_path"])
        with log.open("a") as handle:
            handle.write(f"server_args=ServerArgs(api_key='{KEY}', port={server['port']})\n")
            handle.write(f"[debug] clients must present {KEY}\n")

        bench = run_cli_subprocess(
            "--demo",
            "bench",
            "--server",
            server["id"],
            "--requests",
            "2",
            "--concurrency",
            "1",
            "--output-len",
            "16",
            "--json",
            env=env,
            timeout=120,
        )
        assert bench.returncode == 0, bench.stderr
        record = run_cli_subprocess(
            "--demo",
            "record",
            "--duration",
            "2",
            "--out",
            str(tmp_path / "session.ddrec.gz"),
            env=env,
            timeout=60,
        )
        assert record.returncode == 0, record.stderr
        snap = run_cli_subprocess(
            "snapshot",
            "--demo",
            "--out",
            str(tmp_path / "snap"),
            "--format",
            "json,md,svg",
            env=env,
            timeout=60,
        )
        assert snap.returncode == 0, snap.stderr
        logs = run_cli_subprocess("--demo", "logs", server["id"], "-n", "400", env=env)
        assert logs.returncode == 0
        assert "api_key='***'" in logs.stdout

        services = Services.create(demo=True)
        backend = services.live_backend(recordings=tmp_path / "tui")
        app = ConsoleApp(backend, mode="logs")
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot)
            screen = app.screen
            await until(
                pilot,
                lambda: any("server_args" in line for line in screen.lines),  # type: ignore[attr-defined]
                30,
                "the log in the Logs screen",
            )
            shown = "\n".join(screen.lines)  # type: ignore[attr-defined]
            await pilot.press("s")
            await settle(pilot)
        assert "api_key='***'" in shown

        outputs = {
            "bench stdout": bench.stdout + bench.stderr,
            "logs command": logs.stdout,
            "logs screen": shown,
            "record stdout": record.stdout,
        }
        state = services.state.root
        for path in [*files_under(tmp_path), *files_under(state)]:
            if path.suffix == ".log" and path.parent.name == "logs":
                continue  # SGLang's own log file, as it wrote it
            outputs[str(path)] = content(path)
        assert any("snapshot.json" in name for name in outputs)
        assert any(name.endswith("requests.jsonl") for name in outputs)
        assert any(name.endswith(".ddrec.gz") for name in outputs)
        leaked = [name for name, text in outputs.items() if KEY in text]
        assert leaked == []
        assert "***" in content(tmp_path / "snap" / "snapshot.json")
    finally:
        run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=env)
