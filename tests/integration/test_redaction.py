"""An API key from a profile's env var never leaves: not in the server's log (the waiter
masks what SGLang prints in clear), snapshots, log views, run directories, recordings or
state files, while the server really requires it."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from console.cli.services import Services
from console.core.net import free_port
from console.hw.procs import is_running
from console.tui.app import ConsoleApp
from tests.conftest import REPO, run_cli_subprocess
from tests.tui.conftest import settle, until

KEY = "sk-ddtest-7f3c9a1e5b2d4c6f"


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
    text = text.replace("port = 30000\n", f"port = {free_port()}\n", 1)
    (user_profiles / "qwen-keyed.toml").write_text(text)
    monkeypatch.setenv("DDCONSOLE_TEST_KEY", KEY)
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    return "qwen-keyed"


@pytest.mark.slow
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
        # SGLang prints its arguments, key in clear, into its log (sglang 0.5.23
        # srt/entrypoints/engine.py:1185): the waiter masks it on its way to the file.
        log = Path(server["log_path"]).read_text()
        assert KEY not in log
        launch = [line for line in log.splitlines() if line.startswith("ddconsole: launching")]
        assert len(launch) == 1
        assert "--api-key '***'" in launch[0]  # shlex-quoted
        (server_args,) = [line for line in log.splitlines() if "] server_args={" in line]
        assert "'api_key': '***'" in server_args
        assert "'model_path': " in server_args

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
        assert "'api_key': '***'" in logs.stdout

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
        assert "'api_key': '***'" in shown

        outputs = {
            "bench stdout": bench.stdout + bench.stderr,
            "logs command": logs.stdout,
            "logs screen": shown,
            "record stdout": record.stdout,
        }
        state = services.state.root
        for path in [*files_under(tmp_path), *files_under(state)]:
            outputs[str(path)] = content(path)
        assert any(name.endswith(".log") for name in outputs)
        assert any("snapshot.json" in name for name in outputs)
        assert any(name.endswith("requests.jsonl") for name in outputs)
        assert any(name.endswith(".ddrec.gz") for name in outputs)
        leaked = [name for name, text in outputs.items() if KEY in text]
        assert leaked == []
        assert "***" in content(tmp_path / "snap" / "snapshot.json")
    finally:
        run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=env)


# --- the waiter: the server's output on its way to the log ---------------------------------

Start = Callable[..., tuple[subprocess.Popen[bytes], Path]]


def _wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def waiter(tmp_path: Path) -> Iterator[Start]:
    """Start the waiter (not detached, so the test holds it) on a command; afterwards end
    the session it started, by its leader's pid."""
    started: list[subprocess.Popen[bytes]] = []
    folder = tmp_path / "servers"
    folder.mkdir()

    def start(
        *command: str, env: dict[str, str] | None = None
    ) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / "server.log"
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "console.server.waiter", str(folder), "s1", str(log)),
                "--",
                *command,
            ],
            cwd=REPO,
            env={**os.environ, **(env or {})},
        )
        started.append(proc)
        return proc, log

    yield start
    spawn = folder / "s1.spawn.json"
    if spawn.exists():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(json.loads(spawn.read_text())["pid"], signal.SIGKILL)
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


# Writes its secrets a few bytes at a time with flushes and pauses, so they reach the waiter
# split across reads; then a 100 kB line (several pipe reads) that ends in the key.
_CHILD = r"""
import os, sys, time
out = sys.stdout.buffer
for text in [b"argv: " + " ".join(sys.argv[1:]).encode() + b"\n",
             b"env: " + os.environ["MY_SERVICE_TOKEN"].encode() + b"\n"]:
    for i in range(0, len(text), 3):
        out.write(text[i:i + 3]); out.flush(); time.sleep(0.002)
out.write(b"x" * 100_000 + sys.argv[2].encode() + b"\n"); out.flush()
print("to stderr", sys.argv[4], file=sys.stderr, flush=True)
sys.exit(3)
"""


def test_the_waiter_masks_argv_and_env_secrets(waiter: Start, tmp_path: Path) -> None:
    api, admin, token = "sk-waiter-0123456789abcdef", "adm-9876543210", "svc-token-55aa77"
    proc, log = waiter(
        sys.executable,
        "-c",
        _CHILD,
        api,
        api,
        "--admin-api-k",  # an abbreviation SGLang's parser accepts
        admin,
        "--api-key",
        api,
        env={"MY_SERVICE_TOKEN": token},
    )
    assert proc.wait(60) == 0
    exit_record = json.loads((tmp_path / "servers" / "s1.exit.json").read_text())
    assert exit_record["returncode"] == 3
    text = log.read_bytes().decode()
    for secret in (api, admin, token):
        assert secret not in text, secret
    assert "argv: *** *** --admin-api-k *** --api-key ***\n" in text
    assert "env: ***\n" in text
    assert "x" * 1000 + "***\n" in text
    assert "to stderr ***\n" in text


_TICKER = """
import logging, sys, time
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")
while True:
    logging.info("tick")
    time.sleep(0.05)
"""


@pytest.mark.parametrize("kind", ["python-logging", "shell"])
def test_a_server_outlives_its_waiter(kind: str, waiter: Start, tmp_path: Path) -> None:
    """The waiter killed: the server's writes to the pipe fail (EPIPE) but do not kill it.
    Python ignores SIGPIPE itself and logging swallows the error; a shell would die of
    SIGPIPE unless the waiter leaves it ignored."""
    if kind == "shell":
        command: tuple[str, ...] = ("sh", "-c", "while :; do echo tick; sleep 0.05; done")
    else:
        command = (sys.executable, "-c", _TICKER)
    proc, log = waiter(*command)
    spawn = tmp_path / "servers" / "s1.spawn.json"
    _wait_for(lambda: spawn.exists() and "tick" in log.read_text(), 30, "the server's output")
    pid = json.loads(spawn.read_text())["pid"]
    proc.kill()
    proc.wait(10)
    time.sleep(1.0)  # about 20 writes into the broken pipe
    assert is_running(pid, None), "the server died with its waiter"


_ORPHANING = r"""
import subprocess, sys, time
print("first line", flush=True)
time.sleep(1.0)
subprocess.Popen([sys.executable, "-c",
                  "import time; time.sleep(1.5); print('orphan line', flush=True); time.sleep(60)"])
print("last words", flush=True)
sys.exit(7)
"""


def test_output_is_live_and_the_exit_is_recorded_despite_orphans(
    waiter: Start, tmp_path: Path
) -> None:
    """A line is in the log while the server still runs; when the leader dies and a child
    still holds the pipe (SGLang's orphans), the exit is recorded at once, after the leader's
    last line, and the child's later output is still logged."""
    proc, log = waiter(sys.executable, "-c", _ORPHANING)
    exit_path = tmp_path / "servers" / "s1.exit.json"
    _wait_for(lambda: log.exists() and "first line" in log.read_text(), 10, "the first line")
    assert not exit_path.exists()
    _wait_for(exit_path.exists, 10, "the exit record")
    assert json.loads(exit_path.read_text())["returncode"] == 7
    assert "last words" in log.read_text()
    assert proc.poll() is None  # still copying the orphan's output
    _wait_for(lambda: "orphan line" in log.read_text(), 10, "the orphan's line")


def test_the_simulator_logs_server_args_as_real_sglang(tmp_path: Path) -> None:
    """`server_args={...}`: the resolved dict, keys and ssl_keyfile_password in clear, the
    watermark fields '<redacted>' (sglang 0.5.23 srt/entrypoints/engine.py:173-174, 1185;
    srt/sampling/watermarking/core.py:25-27, 81-91). Run without a waiter: as SGLang prints it."""
    import ast

    log = tmp_path / "sim.log"
    argv = [
        *(sys.executable, "-m", "console.sim", "--model-path", "Qwen/Qwen3.6-27B"),
        *("--port", str(free_port()), "--api-key", KEY, "--admin-api-k", "adm-1234"),
        *("--ssl-keyfile-password", "pw-5678", "--watermark-config", '{"key": "wm-secret"}'),
        *("--sim-speed", "0"),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        _wait_for(lambda: "] server_args={" in log.read_text(), 30, "the server_args line")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the leader and its simulated ranks
        proc.wait(10)
    (line,) = [x for x in log.read_text().splitlines() if "] server_args={" in x]
    resolved = ast.literal_eval(line.split("] server_args=", 1)[1])
    assert isinstance(resolved, dict)
    assert resolved["api_key"] == KEY
    assert resolved["admin_api_key"] == "adm-1234"
    assert resolved["ssl_keyfile_password"] == "pw-5678"
    assert resolved["model_path"] == "Qwen/Qwen3.6-27B"
    for name in ("watermark_config", "watermark_key", "watermark_key_b"):
        assert resolved[name] == "<redacted>"
    assert "wm-secret" not in log.read_text()
    assert len(resolved) > 500  # every ServerArgs field, as resolved_dict gives them
