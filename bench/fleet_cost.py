"""What a fleet costs the console: CPU and memory of the console side at 1, 4 and 8 hosts,
each host a simulated 8-GPU demo box running two servers, reached over SSH.

Each host is an asyncssh server on its own loopback address (127.0.2.N), with its own state
and config folders, as the fleet tests build them (tests/fleet/conftest.py). The console
side runs in a child process of its own: a `Fleet` streaming every host's
`ddconsole metrics --watch --json` once a second over its SSH link, which is what the fleet
view holds. Its CPU seconds per wall second, resident memory and event-loop lag are taken
over a measurement window once every host reads `up` with both servers ready.

With `--tui` the console side is the whole console instead (headless, 200x50, the demo's own
host plus the fleet it starts from hosts.toml): the same figures, with the screens drawn, and
how long a key takes to switch between the Fleet and Dashboard screens while it runs.

    python bench/fleet_cost.py [--hosts 1,4,8] [--seconds 30] [--tui]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# As console.fleet.link does: asyncssh's import warns of DSA, which nothing here uses.
warnings.filterwarnings("ignore", message="DSA is deprecated")

import asyncssh  # noqa: E402

from bench.common import update_results  # noqa: E402
from console.core.net import free_port  # noqa: E402
from tests.fleet.conftest import DDCONSOLE, FakeHost, LoopThread, _host_env  # noqa: E402

SERVERS_PER_HOST = 2


def rss_mib() -> float:
    """This process's resident memory now, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def console_side(seconds: float, settle_s: float) -> dict[str, float]:
    """The console's part: every host of hosts.toml but `local`, streamed until each has its
    servers ready, then measured for `seconds`. Each host's readings feed a store of its own,
    as the console's do (its Dashboard and Topology for that host)."""
    from console.fleet.fleet import Fleet
    from console.fleet.host_store import HostStores
    from console.fleet.hosts import load_hosts

    hosts = [host for host in load_hosts() if not host.is_local]
    fleet = Fleet(hosts, demo=True, interval_s=1.0)
    await fleet.start()
    stores = HostStores(fleet)
    deadline = time.monotonic() + settle_s
    while True:
        summaries = fleet.summaries()
        ready = [s for s in summaries if s.state == "up" and s.servers_ready >= SERVERS_PER_HOST]
        if len(ready) == len(hosts):
            break
        if time.monotonic() > deadline:
            states = {s.name: (s.state, s.reason, s.servers_ready) for s in summaries}
            raise SystemExit(f"hosts not ready within {settle_s:g} s: {states}")
        await asyncio.sleep(0.5)
    readings_before = fleet.version
    cpu_before = time.process_time()
    wall_before = time.monotonic()
    lags: list[float] = []
    while time.monotonic() - wall_before < seconds:
        asked = time.monotonic()
        await asyncio.sleep(0.1)
        lags.append(time.monotonic() - asked - 0.1)
    wall = time.monotonic() - wall_before
    cpu = time.process_time() - cpu_before
    updates = fleet.version - readings_before
    stale = [s.name for s in fleet.summaries() if s.state != "up"]
    rss = rss_mib()
    held = [stores.get(name) for name in stores.names()]
    series = sum(h.store.series_count() for h in held if h is not None)
    store_bytes = sum(h.store.memory_bytes() for h in held if h is not None)
    stores.close()
    await fleet.stop()
    lags.sort()
    return {
        "hosts": len(hosts),
        "cpu_share": cpu / wall,
        "rss_mib": rss,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "lag_p50_ms": statistics.median(lags) * 1000,
        "lag_p99_ms": lags[int(0.99 * (len(lags) - 1))] * 1000,
        "updates_per_s": updates / wall,
        "stale": len(stale),
        "series": series,
        "store_mib": store_bytes / 2**20,
    }


async def tui_side(seconds: float, settle_s: float) -> dict[str, float]:
    """The whole console, headless: it starts its fleet from hosts.toml as it does for a user;
    measured once every host reads `up` with its servers ready, flipping between the Fleet
    and Dashboard screens (h, d) every 2 s as someone watching would."""
    from console.cli.services import Services
    from console.tui.app import ConsoleApp

    backend = Services.create(demo=True).live_backend(recordings=None)
    app = ConsoleApp(backend, mode="fleet", refresh_s=1.0)
    async with app.run_test(size=(200, 50)) as pilot:
        deadline = time.monotonic() + settle_s
        while True:
            fleet = backend.fleet_now()
            summaries = fleet.summaries() if fleet is not None else []
            others = [s for s in summaries if s.name != "local"]
            ready = [s for s in others if s.state == "up" and s.servers_ready >= SERVERS_PER_HOST]
            if len(ready) == len(others):  # no other host: the console alone, as a baseline
                break
            if time.monotonic() > deadline:
                states = {s.name: (s.state, s.reason, s.servers_ready) for s in summaries}
                raise SystemExit(f"hosts not ready within {settle_s:g} s: {states}")
            await asyncio.sleep(0.5)
        readings_before = fleet.version if fleet is not None else 0
        renders_before = app.renders
        cpu_before = time.process_time()
        wall_before = time.monotonic()
        lags: list[float] = []
        keys: list[float] = []
        next_key = wall_before + 2.0
        mode = "fleet"
        while time.monotonic() - wall_before < seconds:
            if time.monotonic() >= next_key:
                mode = "dashboard" if mode == "fleet" else "fleet"
                pressed = time.monotonic()
                await pilot.press("d" if mode == "dashboard" else "h")
                while app.current_mode != mode:
                    await asyncio.sleep(0.001)
                await pilot.pause()
                keys.append(time.monotonic() - pressed)
                next_key = time.monotonic() + 2.0
            asked = time.monotonic()
            await asyncio.sleep(0.1)
            lags.append(time.monotonic() - asked - 0.1)
        wall = time.monotonic() - wall_before
        cpu = time.process_time() - cpu_before
        updates = (fleet.version if fleet is not None else 0) - readings_before
        renders = app.renders - renders_before
        summaries = fleet.summaries() if fleet is not None else []
        stale = [s.name for s in summaries if s.name != "local" and s.state != "up"]
        rss = rss_mib()
    lags.sort()
    keys.sort()
    return {
        "hosts": len(others),
        "cpu_share": cpu / wall,
        "rss_mib": rss,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "lag_p50_ms": statistics.median(lags) * 1000,
        "lag_p99_ms": lags[int(0.99 * (len(lags) - 1))] * 1000,
        "key_p50_ms": statistics.median(keys) * 1000,
        "key_max_ms": keys[-1] * 1000,
        "updates_per_s": updates / wall,
        "renders_per_s": renders / wall,
        "stale": len(stale),
    }


def start_hosts(count: int, root: Path, thread: LoopThread) -> tuple[list[FakeHost], Path]:
    """`count` fake SSH hosts on 127.0.2.1.. and a client home whose ~/.ssh knows them."""
    home = root / "client-home"
    ssh = home / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    client = asyncssh.generate_private_key("ssh-ed25519")
    client.write_private_key(str(ssh / "id_ed25519"))
    (ssh / "id_ed25519").chmod(0o600)
    authorized = root / "authorized_keys"
    client.write_public_key(str(authorized))
    hosts: list[FakeHost] = []
    known: list[str] = []
    for index in range(count):
        address = f"127.0.2.{index + 1}"
        key = asyncssh.generate_private_key("ssh-ed25519")
        host_root = root / f"host-{index}"
        host = FakeHost(
            f"h{index}",
            address,
            free_port(address),
            host_root,
            key,
            authorized,
            thread,
            _host_env(host_root),
        )
        hosts.append(host)
        known.append(f"[{address}]:{host.port} {key.export_public_key('openssh').decode().strip()}")
        host.start()
    (ssh / "known_hosts").write_text("\n".join(known) + "\n")
    config = root / "client-config" / "ddconsole"
    config.mkdir(parents=True)
    (config / "hosts.toml").write_text(
        "".join(
            f'[[host]]\nname = "{h.name}"\ntarget = "bench@{h.address}:{h.port}"\n'
            f'ddconsole = "{DDCONSOLE}"\n\n'
            for h in hosts
        )
    )
    return hosts, home


def host_servers(host: FakeHost, action: str) -> None:
    """Start (`up`) two single-GPU servers on a host, on GPUs 0 and 4, or stop them all."""
    if action == "down":
        commands = [["down", "--all", "--grace", "2"]]
    else:
        commands = [
            ["up", "qwen3.6-27b", "--layout", "tp1", "--gpus", gpus, "--port", str(free_port())]
            for gpus in ("0", "4")
        ]
    for args in commands:
        done = subprocess.run(
            [DDCONSOLE, "--demo", *args],
            env=host.env,
            cwd=host.root,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{host.name}: ddconsole {' '.join(args)}: {done.stderr[-800:]}")


def measure(count: int, seconds: float, tui: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="fleet-cost-") as tmp:
        root = Path(tmp)
        thread = LoopThread()
        hosts, home = start_hosts(count, root, thread)
        try:
            for host in hosts:
                host_servers(host, "up")
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("XDG_")},
                "HOME": str(home),
                "XDG_CONFIG_HOME": str(root / "client-config"),
                "XDG_STATE_HOME": str(root / "client-state"),
            }
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--tui-console" if tui else "--console",
                    str(seconds),
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=seconds + 400,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"console side failed: {done.stderr[-2000:]}")
            return dict(json.loads(done.stdout.strip().splitlines()[-1]))
        finally:
            for host in hosts:
                host_servers(host, "down")
            for host in hosts:
                host.stop()
            thread.close()


def tui_table(rows: list[dict[str, float]], seconds: float) -> str:
    lines = [
        "`python bench/fleet_cost.py --tui` (the whole console, headless at 200x50, as a user",
        "starts it with hosts.toml naming the fake hosts: its own demo host plus the fleet it",
        "starts; each host a fake asyncssh host with a simulated 8-GPU demo box and two",
        f"single-GPU servers; measured over {seconds:g} s once every host read `up`, switching",
        "between the Fleet and Dashboard screens every 2 s). KEY is a press of `h` or `d` until",
        "the other screen is shown, through Textual's test pilot, whose own waits are most of",
        "it: compare its rows with the 0-host row, not with bench/tui.py's terminal figure.",
        "Hosts, servers and the console share this 2-core machine.",
        "",
        "| hosts | console CPU | RSS | loop lag p50 / p99 | key p50 / max | renders/s"
        " | readings/s | stale | load |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {int(row['hosts'])} | {row['cpu_share'] * 100:.1f}% | {row['rss_mib']:.0f} MiB"
            f" | {row['lag_p50_ms']:.1f} / {row['lag_p99_ms']:.1f} ms"
            f" | {row['key_p50_ms']:.0f} / {row['key_max_ms']:.0f} ms"
            f" | {row['renders_per_s']:.1f} | {row['updates_per_s']:.1f} | {int(row['stale'])}"
            f" | {row['load']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", default="1,4,8", help="host counts to measure")
    parser.add_argument("--seconds", type=float, default=30.0, help="measurement window")
    parser.add_argument("--tui", action="store_true", help="the whole console, headless")
    parser.add_argument("--console", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--tui-console", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.console is not None:
        print(json.dumps(asyncio.run(console_side(args.console, settle_s=300))))
        return
    if args.tui_console is not None:
        print(json.dumps(asyncio.run(tui_side(args.tui_console, settle_s=300))))
        return
    rows = []
    for count in (int(c) for c in args.hosts.split(",")):
        load_before = os.getloadavg()[0]
        figures = measure(count, args.seconds, args.tui)
        figures["load"] = (load_before + os.getloadavg()[0]) / 2
        print(json.dumps(figures), flush=True)
        rows.append(figures)
    if args.tui:
        update_results("Fleet cost, whole console (issue 21)", tui_table(rows, args.seconds))
        return
    lines = [
        "`python bench/fleet_cost.py` (the console side of a fleet: one `Fleet` streaming each",
        "host's `metrics --watch --json` once a second over its SSH link, each host's readings",
        "fed into a store of its own as the console does (one hour a series, preallocated, so",
        "the RSS is already what an hour holds for these series); each host a fake",
        "asyncssh host on 127.0.2.N with a simulated 8-GPU demo box and two single-GPU servers;",
        f"measured over {args.seconds:g} s once every host read `up` with both servers ready).",
        "Hosts, servers and the console share this 2-core machine, so the load is the whole",
        "fleet's, and the console's lag includes waiting for a core.",
        "",
        "| hosts | GPUs | servers | console CPU | RSS | host stores | loop lag p50 / p99"
        " | readings/s | stale | load |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        hosts = int(row["hosts"])
        lines.append(
            f"| {hosts} | {8 * hosts} | {SERVERS_PER_HOST * hosts} | {row['cpu_share'] * 100:.1f}%"
            f" | {row['rss_mib']:.0f} MiB | {int(row['series'])} series, {row['store_mib']:.1f} MiB"
            f" | {row['lag_p50_ms']:.1f} / {row['lag_p99_ms']:.1f} ms"
            f" | {row['updates_per_s']:.1f} | {int(row['stale'])} | {row['load']:.1f} |"
        )
    if len(rows) >= 2:
        first, last = rows[0], rows[-1]
        extra = last["hosts"] - first["hosts"]
        per_host_cpu = (last["cpu_share"] - first["cpu_share"]) / extra * 100
        per_host_rss = (last["rss_mib"] - first["rss_mib"]) / extra
        lines += [
            "",
            f"Growth from {int(first['hosts'])} to {int(last['hosts'])} hosts: about"
            f" {per_host_cpu:.2f}% of a core and {per_host_rss:.1f} MiB per added host"
            " (linear in the hosts: one link, one stream and one store each).",
        ]
    update_results("Fleet cost (issue 21)", "\n".join(lines))


if __name__ == "__main__":
    main()
