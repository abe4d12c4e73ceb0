"""Headless verbs never load Textual (nor SSH when no other host is involved); the package
root stays cheap."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

PROBE = """
import json, sys
from console.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
heavy = sorted(m for m in ("textual", "textual_plotext", "plotext", "rich", "asyncssh")
               if m in sys.modules)
sys.stderr.write("\\nMODULES=" + json.dumps(heavy) + "\\n")
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["profiles", "list"],
        ["profiles", "show", "qwen3.6-27b", "--json"],
        ["profiles", "check", "qwen3.6-27b", "--python", "/nonexistent/python", "--json"],
        ["plan", "qwen3.6-27b", "--layout", "tp1", "--variant", "ddtree-b15", "--demo", "--json"],
        # SSH (asyncssh, whose import probes for libraries with gcc) only for other hosts.
        ["ps", "--demo", "--json"],
        ["down", "no-such-server", "--demo"],
    ],
)
def test_headless_verbs_do_not_import_textual(argv: list[str]):
    completed = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    marker = [line for line in completed.stderr.splitlines() if line.startswith("MODULES=")]
    assert marker, completed.stderr
    assert json.loads(marker[-1].removeprefix("MODULES=")) == []


def test_package_root_imports_nothing_heavy():
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, console; print(sorted(m for m in sys.modules if m.startswith(('pydantic',"
            "'httpx','textual','pynvml','psutil'))))",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    assert completed.stdout.strip() == "[]"


def test_console_package_is_this_checkout():
    import console

    assert REPO in __import__("pathlib").Path(console.__file__).resolve().parents
