"""The API key reaches SGLang through a pipe, not its command line (issue 17, F6).

A plan's argv holds `--api-key ***` (and `--admin-api-key ***`) where the key goes; the
record names the variable that holds it. SGLang 0.5.23 reads the key from `--api-key` or from
a YAML file named by `--config` (srt/arg_groups/fields/serving.py:160-167;
srt/server_args.py:400-405, 682-689; srt/utils/server_args_config_parser.py:124-160 checks
only the name's suffix and that the path exists, then reads it with `open`), never from an
environment variable. So the waiter swaps each placeholder pair for one `--config
DIR/key.yaml`, where DIR is a fresh private folder (0700) and key.yaml a named pipe: a
thread writes the key into it each time a reader opens it (`sglang serve` may read the file
once to choose a backend, then again to parse it: cli/utils.py:171-212) until the server
ends. The key is on no disk and in no process's command line; `/proc/PID/cmdline` is
world-readable, the pipe's folder is not.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from console.core.redact import MASK

KEY_FLAGS = {"--api-key": "api_key_env", "--admin-api-key": "admin_api_key_env"}
"""The placeholder flags and the plan field naming the variable that holds each key."""


class KeyPipeError(Exception):
    """The key cannot be handed over: the server must not start (it would run with `***`
    as its key, or with none)."""


class KeyPipe:
    """Serves the keys' YAML on a named pipe until `close`."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.secrets = set(values.values())
        self._data = "".join(
            f"{flag[2:]}: {json.dumps(value)}\n" for flag, value in values.items()
        ).encode()
        self._folder = Path(tempfile.mkdtemp(prefix="ddconsole-key-"))
        self.path = self._folder / "key.yaml"
        os.mkfifo(self.path, 0o600)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="key-pipe", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                fd = os.open(self.path, os.O_WRONLY)  # waits for a reader
            except OSError:
                return
            try:
                if not self._stop.is_set():
                    view = memoryview(self._data)
                    while view:
                        view = view[os.write(fd, view) :]
            except OSError:
                pass  # the reader went away early
            finally:
                os.close(fd)
            # Let this reader see the end of the file before the pipe is opened again (a
            # writer present means no end of file yet). A reader that does see a second copy
            # reads the same keys twice, which YAML and argparse take as one.
            self._stop.wait(0.2)

    def close(self) -> None:
        """Stop serving and remove the pipe and its folder."""
        self._stop.set()
        with contextlib.suppress(OSError):
            # Wakes a writer waiting for a reader; it sees the stop and closes.
            os.close(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK))
        self._thread.join(2.0)
        shutil.rmtree(self._folder, ignore_errors=True)


def placeholders(command: list[str]) -> list[str]:
    """The key flags whose value in `command` is the placeholder."""
    return [
        flag for flag, value in itertools.pairwise(command) if flag in KEY_FLAGS and value == MASK
    ]


def hand_over(
    command: list[str], plan: Mapping[str, object], environ: Mapping[str, str]
) -> tuple[list[str], KeyPipe | None]:
    """`command` with its key placeholders replaced by `--config PIPE`, and the pipe serving
    them (None when there are none). KeyPipeError names what is missing."""
    flags = placeholders(command)
    if not flags:
        return command, None
    if "--config" in command:
        raise KeyPipeError(
            "the command has its own --config, and SGLang takes one: ddconsole passes the API "
            "key in a --config file; move the options of that file into the profile's args"
        )
    values: dict[str, str] = {}
    for flag in flags:
        name = plan.get(KEY_FLAGS[flag])
        value = environ.get(name) if isinstance(name, str) else None
        if not value:
            raise KeyPipeError(
                f"{flag}: the variable that holds the key ({name or 'unknown'}) is not set "
                "for the server; not starting it with no key"
            )
        values[flag] = value
    rest: list[str] = []
    index = 0
    while index < len(command):
        if command[index] in flags and command[index + 1 : index + 2] == [MASK]:
            index += 2
            continue
        rest.append(command[index])
        index += 1
    pipe = KeyPipe(values)
    return [*rest, "--config", str(pipe.path)], pipe
