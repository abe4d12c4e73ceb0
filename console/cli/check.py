"""`ddconsole profiles check`: validate profiles, place every plan, parse it with SGLang."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from console.cli.render import print_json
from console.cli.services import Services
from console.core.errors import PlacementError, ProfileError
from console.profiles.command import DDTREE_PULL_REQUEST, build_command, entry_argv
from console.profiles.flagcheck import FlagCheckUnavailable, FlagProblem, check_args
from console.profiles.loader import LoadedProfile
from console.profiles.models import Algorithm
from console.sim.plancheck import SIMULATOR, check_with_simulator
from console.topology.placement import REDACTED, resolve


@dataclass
class PlanCheck:
    profile: str
    layout: str
    variant: str
    interpreter: str
    args: list[str]
    needs_ddtree: bool
    placement_error: str | None = None
    problems: list[FlagProblem] = field(default_factory=list)
    sglang_version: str | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.error is None and self.placement_error is None

    def to_json(self) -> dict[str, Any]:  # a flag check's --json output, not run data
        return {
            "profile": self.profile,
            "layout": self.layout,
            "variant": self.variant,
            "interpreter": self.interpreter,
            "sglang_version": self.sglang_version,
            "ok": self.ok,
            "problems": [p.to_json() for p in self.problems],
            "placement_error": self.placement_error,
            "error": self.error,
            "notes": self.notes,
        }


def _plan_checks(services: Services, loaded: LoadedProfile, python: str | None) -> list[PlanCheck]:
    topology = services.topology()
    checks = []
    for layout_name in loaded.profile.layouts:
        for variant_name, variant in loaded.profile.variants.items():
            command = build_command(loaded, layout_name, variant_name, demo=False)
            entry_len = len(entry_argv(command.install, demo=False))
            placement_error = None
            try:
                argv = list(resolve(command, topology, port_checker=None).argv)
            except PlacementError as exc:
                placement_error = str(exc)
                argv = list(command.argv)
            args = argv[entry_len:]
            if args[-2:] == ["--api-key", REDACTED]:
                args = args[:-2]
            checks.append(
                PlanCheck(
                    profile=loaded.name,
                    layout=layout_name,
                    variant=variant_name,
                    interpreter=python or command.install.python,
                    args=args,
                    needs_ddtree=variant.algorithm is Algorithm.DDTREE,
                    placement_error=placement_error,
                )
            )
    return checks


def run_check(services: Services, args: argparse.Namespace) -> int:
    catalog = services.catalog
    broken: list[ProfileError] = []
    loaded_profiles: list[LoadedProfile] = []
    if args.name and not args.all:
        loaded_profiles.append(catalog.get(args.name))
    else:
        for entry in catalog.entries():
            if entry.loaded is not None:
                loaded_profiles.append(entry.loaded)
            elif entry.error is not None:
                broken.append(entry.error)
    checks = [c for loaded in loaded_profiles for c in _plan_checks(services, loaded, args.python)]
    by_interpreter: dict[str, list[PlanCheck]] = {}
    for check in checks:
        by_interpreter.setdefault(check.interpreter, []).append(check)
    # Demo mode launches the simulator in place of SGLang: its parser is the one to ask.
    with_simulator = services.demo and not args.python
    for interpreter, group in by_interpreter.items():
        keys = {f"{c.profile}/{c.layout}/{c.variant}": c for c in group}
        try:
            if with_simulator:
                results = check_with_simulator({k: c.args for k, c in keys.items()})
            else:
                results = check_args(
                    interpreter, {k: c.args for k, c in keys.items()}, timeout=args.timeout
                )
        except FlagCheckUnavailable as exc:
            for check in group:
                check.error = str(exc)
            continue
        for key, check in keys.items():
            result = results[key]
            check.problems = list(result.problems)
            check.sglang_version = result.sglang_version
            check.interpreter = result.interpreter
            flags = {p.flag for p in result.problems}
            if with_simulator and check.needs_ddtree:
                check.notes.append(
                    f"the simulator stands in for the DDTree build; a real SGLang needs the "
                    f"pull request {DDTREE_PULL_REQUEST}"
                )
            elif check.needs_ddtree and "--speculative-ddtree-budget" in flags:
                check.notes.append(
                    f"needs an SGLang built with the DDTree pull request {DDTREE_PULL_REQUEST}; "
                    f"SGLang {result.sglang_version} here has no DDTREE"
                )
    ok = not broken and all(c.ok for c in checks)
    if args.json:
        print_json(
            {
                "ok": ok,
                "broken_profiles": [
                    {"path": e.path, "key_path": e.key_path, "reason": e.reason} for e in broken
                ],
                "plans": [c.to_json() for c in checks],
            }
        )
    else:
        _print_human(broken, checks)
    if broken:
        return 2
    return 0 if ok else 1


def _print_human(broken: list[ProfileError], checks: list[PlanCheck]) -> None:
    for error in broken:
        print(f"BROKEN {error}")
    shown_versions: set[tuple[str, str | None]] = set()
    said: set[str] = set()
    width = max((len(f"{c.profile} {c.layout} {c.variant}") for c in checks), default=0)
    for check in checks:
        marker = (check.interpreter, check.sglang_version)
        if check.sglang_version and marker not in shown_versions:
            shown_versions.add(marker)
            where = "as" if check.interpreter == SIMULATOR else "at"
            print(f"SGLang {check.sglang_version} {where} {check.interpreter}")
        label = f"{check.profile} {check.layout} {check.variant}".ljust(width)
        print(f"  {label}  {'ok' if check.ok else 'FAIL'}")
        if check.placement_error:
            print(f"      placement: {check.placement_error}")
        if check.error:
            # The same reason for every plan of an interpreter (no SGLang there) is said once.
            print(f"      {check.error if check.error not in said else '(as above)'}")
            said.add(check.error)
        for problem in check.problems:
            where = f"{problem.flag}: " if problem.flag else ""
            print(f"      {where}{problem.message}")
        for note in check.notes:
            print(f"      -> {note if note not in said else '(as above)'}")
            said.add(note)
    failed = sum(1 for c in checks if not c.ok)
    if checks:
        total = f"{len(checks)} plan{'s' if len(checks) != 1 else ''}"
        print(f"{failed} of {total} failed" if failed else f"{total} ok")
