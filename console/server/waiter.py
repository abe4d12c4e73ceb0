"""The parent of a managed server: spawns it in its own session and records how it ended.

Run detached by the console (`python -m console.server.waiter STATE_SERVERS_DIR ID LOG --
ARGV...`). It writes `ID.spawn.json` (pid, start time) as soon as the server runs and
`ID.exit.json` (return code) when it ends, so any later console knows both. Kept free of
heavy imports: it starts for every launch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from console.core.jsonio import atomic_write_text
from console.hw.procs import process_info


def main(argv: list[str]) -> int:
    if argv[:1] == ["--detach"]:
        # Fork once more and let the launching console return: the waiter then belongs to no
        # console (no zombie to reap, nothing tied to the console's lifetime).
        if os.fork() > 0:
            os._exit(0)
        os.setsid()
        argv = argv[1:]
    if len(argv) < 5 or argv[3] != "--":
        print(
            "usage: python -m console.server.waiter SERVERS_DIR ID LOG -- ARGV...", file=sys.stderr
        )
        return 2
    folder, server_id, log_path, command = Path(argv[0]), argv[1], Path(argv[2]), argv[4:]
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    with log_path.open("ab", buffering=0) as log:
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                # The server must not inherit our ignored signals.
                restore_signals=True,
                preexec_fn=_default_signals,
            )
        except OSError as exc:
            log.write(f"ddconsole: cannot start {command[0]}: {exc}\n".encode())
            _write(
                folder / f"{server_id}.exit.json",
                {"returncode": 127, "ended_wall": time.time(), "spawn_error": str(exc)},
            )
            return 1
        info = process_info(proc.pid)
        _write(
            folder / f"{server_id}.spawn.json",
            {
                "pid": proc.pid,
                "start_ticks": info.start_ticks if info else 0,
                "waiter_pid": os.getpid(),
                "spawned_wall": time.time(),
            },
        )
        returncode = proc.wait()
    _write(folder / f"{server_id}.exit.json", {"returncode": returncode, "ended_wall": time.time()})
    return 0


def _default_signals() -> None:
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _write(path: Path, data: dict[str, object]) -> None:
    atomic_write_text(path, json.dumps(data))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
