"""Every shell command in README.md runs, and does what the README says it does.

The commands are read from the README's ```sh/```bash/```console blocks and run one by one in
bash, as a user would type them, in a sandbox: temporary XDG folders and home, the shipped
profiles moved to free ports (the suite holds their fixed ports), simulators at zero simulated
delay. `ddconsole` is a shell function adding `--demo`, so each command runs in demo mode,
except the section on servers ddconsole did not start, which needs a real host's view (it
starts a simulator by hand, as the README describes).

What the sandbox must change is listed here, each with its reason: placeholders (RUN, the
colleague's log, a host name), durations shortened so that a ten-minute recording takes
seconds, and the few commands that cannot run here (SKIP). A listed command that is no longer
in the README fails the test, so the lists cannot go stale.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fcntl import ioctl
from pathlib import Path

import httpx
import pytest

from console.cli.services import Services
from console.core.net import free_port
from console.core.paths import StatePaths
from tests.conftest import REPO

README = REPO / "README.md"
VENV_BIN = Path(sys.executable).parent
SHELL_BLOCKS = ("sh", "bash", "console")

INSTALL_AND_DEMO = (
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/ddconsole --demo"
)
SKIP = {
    (
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && "
        ".venv/bin/python -m pytest -n 4"
    ): "installs and runs the whole suite, this test included",
    ".venv/bin/python scripts/screenshots.py": (
        "rewrites the committed screenshots/ (tests/tui/test_snapshots.py renders the screens)"
    ),
    ".ci/run": "CI itself: a fresh venv, lint, type checks and the whole suite",
    '.venv/bin/python -m pytest -m "not slow"': "the suite, this test included",
    ".venv/bin/python bench/tui.py": (
        "measures the console for minutes and rewrites bench/RESULTS.md"
    ),
}

SECTIONS = [
    "ddconsole",
    "The command line",
    "Profiles",
    "Servers",
    "Diagnosing a log",
    "Benchmarks and campaigns",
    "Workloads",
    "Steady state, SLOs and goodput",
    "Plots, reports and comparing runs",
    "Telemetry",
    "Snapshots, recordings and replay",
    "The simulator",
    "Servers ddconsole did not start",
]
"""The order the README's sections run in: servers before what needs them. A README section
with commands that is neither here nor made only of SKIP entries fails the test."""


@dataclass(frozen=True)
class Command:
    section: str
    text: str


@dataclass(frozen=True)
class Spec:
    """How one README command runs when it needs more than `ddconsole` in demo mode."""

    rewrite: tuple[tuple[str, str], ...] = ()
    """(README text, what runs instead): placeholders and shortened durations."""
    code: int = 0
    """The exit status the README documents for it."""
    until: str | None = None
    """Runs until interrupted: Ctrl-C once this text is printed (or after a while)."""
    tui: str | None = None
    """Opens the console: run on a terminal until this shows in its top bar, quit with `q`."""
    demo: bool = True
    setup: str | None = None
    """A Sandbox method run first (what the README's reader did before this command)."""


SHORTER = "a shorter run of the same command: the README's length would take minutes in the suite"
SPECS: dict[str, Spec] = {
    INSTALL_AND_DEMO: Spec(
        rewrite=((INSTALL_AND_DEMO, f"{VENV_BIN / 'ddconsole'} --demo"),), tui="DEMO"
    ),
    "ddconsole completion zsh > ~/.zsh/completions/_ddconsole": Spec(setup="completion_folders"),
    "ddconsole logs qwen3.6-27b-tp1-1 -f": Spec(until="ready to roll"),
    "ddconsole diagnose ~/colleague/server.log": Spec(setup="colleague_log"),
    "ddconsole down ext-12345": Spec(rewrite=(("ext-12345", "{external}"),), code=2, demo=False),
    "ddconsole down ext-12345 --external --yes": Spec(
        rewrite=(("ext-12345", "{external}"),), demo=False
    ),
    "ddconsole diagnose /path/to/server.log": Spec(
        rewrite=(("/path/to/server.log", "server.log"),), setup="local_log"
    ),
    "ddconsole diagnose server.log --exit-status -9": Spec(code=1),
    "ddconsole bench --server qwen3.6-27b-tp1-1 --concurrency 1,4,16 --requests 64 \\\n"
    "    --input-len 512 --output-len 256": Spec(setup="bench_server"),
    "ddconsole bench --url http://127.0.0.1:30000 --rate 2,4,8 --duration 120": Spec(
        rewrite=(("http://127.0.0.1:30000", "{url}"), ("--duration 120", "--duration 1"))
    ),
    "ddconsole campaign campaigns/qwen-ddtree-budgets.toml": Spec(setup="no_servers"),
    "ddconsole runs show RUN --follow": Spec(rewrite=(("RUN", "{detached}"),)),
    "ddconsole runs stop RUN --yes": Spec(rewrite=(("RUN", "{running}"),), setup="running_bench"),
    "ddconsole runs compare RUN1 RUN2": Spec(rewrite=(("RUN1", "{run1}"), ("RUN2", "{run2}"))),
    # The sections after the campaign (which stopped every server) bench the demo server.
    "ddconsole bench --url URL --workload multi-turn --concurrency 8": Spec(
        rewrite=(("URL", "{url}"),), setup="bench_server"
    ),
    "ddconsole bench --url URL --workload shared-prefix:prefix_len=1024,groups=8 "
    "--concurrency 16": Spec(rewrite=(("URL", "{url}"),)),
    "ddconsole bench --url URL --workload chat-prompts": Spec(rewrite=(("URL", "{url}"),)),
    "ddconsole bench --url URL --trace workloads/mooncake-agent.jsonl --replay-speed 2": Spec(
        rewrite=(("URL", "{url}"), ("--replay-speed 2", "--replay-speed 20"))
    ),
    "ddconsole bench --server qwen3.6-27b-tp1-1 --concurrency 1,4,16 --requests 64 \\\n"
    "    --slo ttft=2s,itl=50ms": Spec(setup="bench_server"),
    "ddconsole bench --server qwen3.6-27b-tp1-1 --find-max concurrency --slo ttft=500ms "
    "--attainment 0.99": Spec(
        rewrite=(("--find-max concurrency", "--find-max concurrency --find-max-limit 4"),)
    ),
    "ddconsole runs report RUN": Spec(rewrite=(("RUN", "{run1}"),)),
    "ddconsole runs report RUN --format html --out /tmp/r": Spec(
        rewrite=(("RUN", "{run1}"), ("/tmp/r", "report-html"))
    ),
    "ddconsole runs compare RUN1 RUN2 RUN3": Spec(
        rewrite=(("RUN1", "{run1}"), ("RUN2", "{run2}"), ("RUN3", "{run3}"))
    ),
    "ddconsole runs import sglang_bench.jsonl": Spec(setup="bench_serving_file"),
    "ddconsole metrics --once --json --url http://gpu-box:30000": Spec(
        rewrite=(("http://gpu-box:30000", "{url}"),)
    ),
    "ddconsole metrics --watch --interval 2": Spec(until="gpu util"),
    "ddconsole record --duration 600 --out night.ddrec.gz": Spec(
        rewrite=(("--duration 600", "--duration 4"),)
    ),
    "ddconsole replay night.ddrec.gz --at 120 --speed 10": Spec(
        rewrite=(("--at 120", "--at 1"),), tui="REPLAY"
    ),
    "ddconsole replay ~/.local/state/ddconsole/runs/RUN": Spec(
        rewrite=(("~/.local/state/ddconsole/runs/RUN", "{run_dir}"),), tui="REPLAY"
    ),
    "ddconsole snapshot --from-recording night.ddrec.gz --at 300 --out then/": Spec(
        rewrite=(("--at 300", "--at 2"),)
    ),
    "ddconsole sim --model-path Qwen/Qwen3.6-27B --served-model-name qwen3.6-27b --port 30000 \\\n"
    "    --enable-metrics --sim-speed 10 --sim-fault crash-mid-stream:64": Spec(
        rewrite=(("--port 30000", "--port {free_port}"),), until="ready to roll"
    ),
    # Two lines the Servers section also has, told apart by their comments.
    "ddconsole ps                                   "
    "# managed servers, then the external ones": Spec(demo=False, setup="external_server"),
    "ddconsole down --all                           "
    "# managed servers only; external ones untouched": Spec(demo=False),
}
"""By command text as the README writes it (comment included when two lines differ only
there), continuation lines joined with their backslash-newline."""

REASONS = {
    "python3 -m venv": "the suite runs in that install: the demo console it opens is run",
    "ext-12345": "the id of the simulator this test starts by hand",
    "/path/to/server.log": "a log that exists: a demo server's",
    "http://127.0.0.1:30000": "the demo server's URL (the suite holds port 30000)",
    "http://gpu-box:30000": "the demo server's URL (there is no gpu-box here)",
    "RUN": "an id from `runs list`",
    "URL": "the demo server's URL",
    "--find-max": "a search stopped at 4 streams: the whole one takes minutes in the suite",
    "--replay-speed": SHORTER,
    "/tmp/r": "a folder of this sandbox",
    "~/.local/state/ddconsole/runs/RUN": "a run folder of this sandbox",
    "--port 30000": "a free port (the suite holds 30000)",
    "--duration": SHORTER,
    "--at": "a moment inside the shortened recording",
}


def readme_commands() -> list[Command]:
    """Each command of the README's shell blocks, continuation lines joined; blank lines and
    comment-only lines left out. In ```console blocks, the lines after `$ `."""
    commands: list[Command] = []
    heading = ""
    language: str | None = None
    pending = ""
    for line in README.read_text(encoding="utf-8").splitlines():
        if language is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            fence = re.match(r"^```(\w*)\s*$", line)
            if fence:
                language = fence[1]
            continue
        if line.startswith("```"):
            language = None
            continue
        if language not in SHELL_BLOCKS:
            continue
        if language == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        if line.endswith("\\"):
            continue
        commands.append(Command(heading, pending))
        pending = ""
    return commands


def bare(text: str) -> str:
    """A command without its trailing comment."""
    return text.split("  #", 1)[0].strip()


def skipped(command: Command) -> bool:
    return command.text in SKIP or bare(command.text) in SKIP


def spec_of(command: Command) -> Spec:
    if command.text in SPECS:
        return SPECS[command.text]
    return SPECS.get(bare(command.text), Spec())


@dataclass
class Sandbox:
    """Where the README's commands run, and what earlier commands left there."""

    root: Path
    ports: dict[str, int]
    home: Path = field(init=False)
    work: Path = field(init=False)
    values: dict[str, str] = field(default_factory=dict)
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.work = self.root / "work"
        self.home.mkdir()
        self.work.mkdir()
        # The README's paths are relative to a checkout: its campaign files are there.
        (self.work / "campaigns").symlink_to(REPO / "campaigns")
        (self.work / "workloads").symlink_to(REPO / "workloads")

    @property
    def env(self) -> dict[str, str]:
        env = {**os.environ, "HOME": str(self.home), "DDCONSOLE_SIM_SPEED": "0"}
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        env.pop("DDCONSOLE_SIM_FAULT", None)
        return env

    def dd(self, *args: str, demo: bool = True, timeout: float = 120) -> str:
        """A setup step: `ddconsole ARGS` (not a README command); its stdout."""
        argv = [str(VENV_BIN / "ddconsole"), *args, *(["--demo"] if demo else [])]
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.work,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, f"setup {argv}: {done.stdout}\n{done.stderr}"
        return done.stdout

    def runs(self) -> list[dict]:
        """Every demo run, newest first (read here: a setup step, not a README command)."""
        from console.bench.listing import list_runs

        rows = [row.to_json() for row in list_runs(StatePaths.for_mode(True).runs)]
        return sorted(rows, key=lambda r: r["created_wall"] or 0, reverse=True)

    def servers(self) -> list[dict]:
        """Every demo server, stopped ones too."""
        statuses, _ = Services.create(demo=True).manager().statuses(probe=False)
        return [status.to_json() for status in statuses]

    # -- setup steps -----------------------------------------------------------------------

    def completion_folders(self) -> None:
        (self.home / ".zsh" / "completions").mkdir(parents=True)
        (self.home / ".config" / "fish" / "completions").mkdir(parents=True)

    def _server_log(self) -> Path:
        tp1 = [s for s in self.servers() if s["id"] == "qwen3.6-27b-tp1-1"]
        assert tp1, "the README's first `up` made qwen3.6-27b-tp1-1"
        return Path(tp1[0]["log_path"])

    def colleague_log(self) -> None:
        log = self._server_log()
        (self.home / "colleague").mkdir()
        shutil.copy(log, self.home / "colleague" / "server.log")
        shutil.copy(log, self.work / "server.log")  # for `diagnose server.log` further on

    def local_log(self) -> None:
        assert (self.work / "server.log").is_file()

    def bench_server(self) -> None:
        """A ready qwen3.6-27b-tp1-1, as after the Servers section's first `up`."""
        ready = [s for s in self.servers() if s["state"] == "ready"]
        if not any(s["id"] == "qwen3.6-27b-tp1-1" for s in ready):
            self.dd("down", "--all", "--grace", "2")
            self.dd("up", "qwen3.6-27b", "--layout", "tp1", "--variant", "ddtree-b15")
        self.values["url"] = f"http://127.0.0.1:{self.ports['qwen3.6-27b']}"

    def no_servers(self) -> None:
        """The campaign launches on the GPUs the bench server holds: it goes first."""
        self.values["run1"] = next(
            r["run_id"] for r in self.runs() if r["name"].startswith("bench-qwen3.6-27b")
        )
        self.dd("down", "--all", "--grace", "2")

    def wait_runs(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while any(r["status"] == "running" for r in self.runs()):
            assert time.monotonic() < deadline, "runs still running"
            time.sleep(0.5)

    def running_bench(self) -> None:
        """A benchmark still running, to stop: a long one, detached."""
        self.wait_runs()
        self.bench_server()
        before = {r["run_id"] for r in self.runs()}
        self.dd("bench", "--server", "qwen3.6-27b-tp1-1", "--requests", "1000000", "--detach")
        new = [r for r in self.runs() if r["run_id"] not in before]
        assert len(new) == 1
        self.values["running"] = new[0]["run_id"]

    def bench_serving_file(self) -> None:
        self.wait_runs()
        line = {
            "backend": "sglang",
            "max_concurrency": 4,
            "request_rate": float("inf"),
            "completed": 64,
            "duration": 10.0,
            "total_output_tokens": 16384,
            "output_throughput": 1638.4,
            "request_throughput": 6.4,
            "median_ttft_ms": 40.0,
            "p99_ttft_ms": 60.0,
            "median_tpot_ms": 6.0,
            "p99_tpot_ms": 7.0,
            "median_itl_ms": 30.0,
            "accept_length": 4.9,
            "server_info": {"served_model_name": "qwen3.6-27b"},
        }
        (self.work / "sglang_bench.jsonl").write_text(json.dumps(line) + "\n")

    def external_server(self) -> None:
        """An SGLang-like server started by hand (the README: the title rule finds
        `ddconsole sim`), on a free port, outside ddconsole's state."""
        port = free_port()
        argv = [str(VENV_BIN / "ddconsole"), "sim", "--model-path", "Qwen/Qwen3.6-27B"]
        proc = subprocess.Popen(
            [*argv, "--port", str(port)],
            env=self.env,
            cwd=self.work,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.started.append(proc)
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "the hand-started simulator exited"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the hand-started simulator never got ready"
            time.sleep(0.2)
        self.values["external"] = f"ext-{proc.pid}"

    # -- the values earlier commands left ----------------------------------------------------

    def fill(self, text: str) -> str:
        if "{detached}" in text:
            self.values["detached"] = self.runs()[0]["run_id"]
        if "{run2}" in text:
            self.values["run2"] = next(
                r["run_id"] for r in self.runs() if r["name"] == "qwen-ddtree-budgets"
            )
        if "{run3}" in text:
            self.values["run3"] = self.runs()[0]["run_id"]
        if "{run_dir}" in text:
            self.wait_runs()
            self.values["run_dir"] = self.runs()[-1]["run_dir"]
        if "{free_port}" in text:
            self.values["free_port"] = str(free_port())
        return text.format(**self.values)

    def close(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
        for run in self.runs():
            if run["status"] == "running":
                self.dd("runs", "stop", run["run_id"], "--yes")
        self.dd("down", "--all", "--grace", "2")
        self.dd("down", "--all", "--grace", "2")


PRELUDE = 'set -e\nddconsole() { command ddconsole --demo "$@"; }\n'


def run_plain(box: Sandbox, script: str, timeout: float = 180) -> tuple[int, str]:
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=box.env,
        cwd=box.work,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def _as_a_shell_starts_it() -> None:
    """Ctrl-C as a terminal's shell hands it to a command: SIGINT neither ignored nor blocked.
    A pytest worker's own mask and dispositions are inherited across exec otherwise, and an
    earlier test's event loop can leave SIGINT blocked there (a follower in CI then outlived
    every Ctrl-C)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_until(box: Sandbox, script: str, marker: str, wait_s: float = 30) -> tuple[int, str]:
    """Run until `marker` shows (or `wait_s` passes), then Ctrl-C, as a user stops `-f`."""
    proc = subprocess.Popen(
        ["bash", "--norc", "--noprofile", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=box.env,
        cwd=box.work,
        start_new_session=True,
        preexec_fn=_as_a_shell_starts_it,
    )
    assert proc.stdout is not None
    seen = b""
    deadline = time.monotonic() + wait_s
    os.set_blocking(proc.stdout.fileno(), False)
    while time.monotonic() < deadline and proc.poll() is None:
        select.select([proc.stdout], [], [], 0.2)
        seen += proc.stdout.read() or b""
        if marker.encode() in seen:
            break
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    # Read on while it stops, as a terminal does: a follower whose pipe filled up would
    # otherwise block on its last write (its exit flushes stdout) and never end. One that
    # outlives Ctrl-C gets a second, then SIGTERM (what ran then is printed for the record);
    # only one that outlives them all fails.
    for then in (signal.SIGINT, signal.SIGTERM, None):
        deadline = time.monotonic() + 15
        while proc.poll() is None and time.monotonic() < deadline:
            select.select([proc.stdout], [], [], 0.2)
            seen += proc.stdout.read() or b""
        if proc.poll() is not None or then is None:
            break
        print(
            f"{script!r} outlived a signal; sending {then.name}:",
            subprocess.run(
                [
                    "sh",
                    "-c",
                    f"ps -o pid,stat,wchan:24,args -g {proc.pid}; for p in $(pgrep -g {proc.pid});"
                    ' do echo "$p $(grep -E "SigBlk|SigIgn" /proc/$p/status | tr "\\n" " ")";'
                    " done",
                ],
                capture_output=True,
                text=True,
                check=False,
            ).stdout,
        )
        os.killpg(proc.pid, then)
    try:
        code = proc.wait(timeout=1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)  # reaped here, not warned about in a later test
            proc.stdout.close()
    os.set_blocking(proc.stdout.fileno(), True)
    seen += proc.stdout.read() or b""
    proc.stdout.close()
    text = seen.decode(errors="replace")
    assert marker.strip() == "" or marker in text, f"never printed {marker!r}:\n{text[-3000:]}"
    stopped = (0, 130, -signal.SIGINT, -signal.SIGTERM, 128 + signal.SIGTERM)
    return (0 if code in stopped else code), text


def run_tui(box: Sandbox, script: str, marker: str, timeout: float = 60) -> tuple[int, str]:
    """Open the console on a 100x30 terminal, wait for `marker`, let it draw, press `q`."""
    leader, follower = pty.openpty()
    ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(
        ["bash", "--norc", "--noprofile", "-c", script],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**box.env, "TERM": "xterm-256color"},
        cwd=box.work,
        start_new_session=True,
    )
    os.close(follower)
    seen = b""
    quit_at = None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(leader, 65536)
                except OSError:
                    break
            if quit_at is None and marker.encode() in seen:
                quit_at = time.monotonic() + 1.5  # let it draw a few frames
            if quit_at is not None and time.monotonic() > quit_at:
                os.write(leader, b"q")
                quit_at = float("inf")
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(leader)
    text = seen.decode(errors="replace")
    assert quit_at is not None, f"the console never showed {marker}:\n{text[-2000:]}"
    return code, text


@pytest.fixture
def box(tmp_path: Path, free_port_profiles: dict[str, int]) -> Iterator[Sandbox]:
    (tmp_path / "readme").mkdir()
    sandbox = Sandbox(tmp_path / "readme", free_port_profiles)
    try:
        yield sandbox
    finally:
        sandbox.close()


def test_the_lists_name_only_readme_commands():
    texts = {c.text for c in readme_commands()}
    bares = {bare(t) for t in texts}
    stale = [t for t in [*SKIP, *SPECS] if t not in texts and t not in bares]
    assert not stale, f"listed here but no longer in README.md: {stale}"
    assert len(texts) > 40
    for key in SPECS:
        for old, _ in SPECS[key].rewrite:
            assert any(old.startswith(word) for word in REASONS), f"no reason for {old!r}"


@pytest.mark.slow
def test_every_readme_command_runs(box: Sandbox):
    """About 45 commands and a dozen simulator servers, each command a fresh ddconsole
    process: about 2.5 minutes on a shared 2-core machine at load 4, hence `slow`."""
    commands = readme_commands()
    unknown = sorted({c.section for c in commands if not skipped(c)} - set(SECTIONS))
    assert not unknown, f"README sections with commands this test does not place: {unknown}"
    ran: list[str] = []
    for section in SECTIONS:
        for command in (c for c in commands if c.section == section and not skipped(c)):
            spec = spec_of(command)
            if spec.setup:
                step: Callable[[], None] = getattr(box, spec.setup)
                step()
            text = command.text
            for old, new in spec.rewrite:
                text = text.replace(old, new)
            text = box.fill(text)
            script = (PRELUDE if spec.demo else "set -e\n") + text
            if spec.tui is not None:
                code, output = run_tui(box, script, spec.tui)
            elif spec.until is not None:
                code, output = run_until(box, script, spec.until)
            else:
                code, output = run_plain(box, script)
            assert "Traceback" not in output, f"{text}\n{output[-3000:]}"
            assert code == spec.code, (
                f"README command failed ({section}): {text}\n"
                f"exit status {code}, expected {spec.code}\n{output[-3000:]}"
            )
            ran.append(command.text)
    assert len(ran) == len([c for c in commands if not skipped(c)])
