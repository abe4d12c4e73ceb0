"""`ddconsole profiles list|show|check`."""

from __future__ import annotations

import argparse
from typing import Any

from console.cli.render import print_json, table


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "profiles",
        parents=[common],
        help="list, show and check server profiles",
        description="Profiles are TOML files: shipped ones, overridden by name by "
        "$XDG_CONFIG_HOME/ddconsole/profiles/*.toml.",
    )
    sub = parser.add_subparsers(title="actions", metavar="ACTION")
    parser.set_defaults(handler=_list)

    p_list = sub.add_parser("list", parents=[common], help="every profile, broken ones too")
    p_list.add_argument("--json", action="store_true", help="machine-readable output")
    p_list.set_defaults(handler=_list)

    p_show = sub.add_parser("show", parents=[common], help="one profile in full")
    p_show.add_argument("name", metavar="NAME", help="a profile name")
    p_show.add_argument("--json", action="store_true", help="machine-readable output")
    p_show.set_defaults(handler=_show)

    p_check = sub.add_parser(
        "check",
        parents=[common],
        help="validate profiles and parse every plan with the installed SGLang's own parser",
    )
    p_check.add_argument("name", metavar="NAME", nargs="?", help="one profile (default: all)")
    p_check.add_argument("--all", action="store_true", help="check every profile (default)")
    p_check.add_argument(
        "--python",
        metavar="PATH",
        help="check with this SGLang interpreter instead of the profile's",
    )
    p_check.add_argument(
        "--timeout",
        type=float,
        default=180.0,
        metavar="S",
        help="seconds to wait for SGLang's parser (default 180)",
    )
    p_check.add_argument("--json", action="store_true", help="machine-readable output")
    p_check.set_defaults(handler=_check)


def _services(args: argparse.Namespace) -> Any:
    from console.cli.services import Services

    return Services.create(demo=bool(getattr(args, "demo", False)))


def _list(args: argparse.Namespace) -> int:
    services = _services(args)
    entries = services.catalog.entries()
    if getattr(args, "json", False):
        print_json([_entry_json(e) for e in entries])
        return 0
    if not entries:
        print(
            f"no profiles (looked in {services.catalog.shipped_dir} and "
            f"{services.catalog.user_dir})"
        )
        return 0
    rows = []
    for entry in entries:
        if entry.loaded is None:
            reason = entry.error.reason if entry.error else "unreadable"
            where = f"{entry.error.key_path}: " if entry.error and entry.error.key_path else ""
            rows.append([entry.name, entry.origin, "-", "-", "-", "-", f"BROKEN {where}{reason}"])
            continue
        profile = entry.loaded.profile
        rows.append(
            [
                entry.name,
                entry.origin + (" (overrides shipped)" if entry.overrides else ""),
                profile.model.name,
                profile.model.architecture.value,
                ",".join(profile.layouts),
                ",".join(profile.variants),
                "ok",
            ]
        )
    print(table(["NAME", "ORIGIN", "MODEL", "ARCHITECTURE", "LAYOUTS", "VARIANTS", "STATUS"], rows))
    broken = [e for e in entries if e.loaded is None]
    for entry in broken:
        print(f"\n{entry.name}: {entry.error}")
    return 0


def _entry_json(entry: Any) -> dict[str, Any]:  # a profile listing's --json, not run data
    data: dict[str, Any] = {
        "name": entry.name,
        "path": str(entry.path),
        "origin": entry.origin,
        "overrides": str(entry.overrides) if entry.overrides else None,
        "ok": entry.loaded is not None,
        "error": None,
    }
    if entry.error is not None:
        data["error"] = {
            "key_path": entry.error.key_path,
            "reason": entry.error.reason,
            "message": str(entry.error),
        }
    if entry.loaded is not None:
        profile = entry.loaded.profile
        data.update(
            {
                "model": profile.model.name,
                "architecture": profile.model.architecture.value,
                "layouts": list(profile.layouts),
                "variants": list(profile.variants),
            }
        )
    return data


def _show(args: argparse.Namespace) -> int:
    services = _services(args)
    loaded = services.catalog.get(args.name)
    profile = loaded.profile
    if args.json:
        from console.core.redact import redact_env

        dumped = profile.model_dump(mode="json")  # secret env values shown as `***`
        for table_ in [dumped["server"], *dumped["variants"].values()]:
            table_["env"] = redact_env(table_["env"])
        print_json(
            {"name": loaded.name, "path": str(loaded.path), "origin": loaded.origin, **dumped}
        )
        return 0
    print(f"{loaded.name}  ({loaded.origin}: {loaded.path})")
    if profile.description:
        print(f"  {profile.description}")
    model = profile.model
    print(f"\nmodel     {model.name}  [{model.architecture.value}]")
    print(f"path      {model.path}")
    print(f"served as {model.effective_served_name}")
    print(f"sglang    {profile.sglang.python} ({profile.sglang.entry})")
    print(
        f"server    {profile.server.host}:{profile.server.port}"
        + (f"  api key from ${profile.server.api_key_env}" if profile.server.api_key_env else "")
    )
    if profile.server.args:
        print(f"args      {' '.join(profile.server.args)}")
    if profile.server.env:
        from console.core.redact import redact_env

        shown = redact_env(profile.server.env)
        print("env       " + " ".join(f"{k}={v}" for k, v in shown.items()))
    print("\nlayouts")
    print(
        table(
            ["NAME", "TP", "DP", "GPUS", "NUMA", "DESCRIPTION"],
            [
                [
                    name,
                    lay.tp,
                    lay.dp,
                    ",".join(map(str, lay.gpus)),
                    lay.numa.value,
                    lay.description,
                ]
                for name, lay in profile.layouts.items()
            ],
            indent="  ",
        )
    )
    print("\nvariants")
    rows = []
    for name, var in profile.variants.items():
        detail = var.description
        if var.requires:
            detail += f" [needs {var.requires}]"
        rows.append(
            [
                name,
                var.algorithm.value,
                var.max_running_requests if var.max_running_requests else "-",
                detail,
            ]
        )
    print(table(["NAME", "ALGORITHM", "MAX-RUNNING", "DESCRIPTION"], rows, indent="  "))
    return 0


def _check(args: argparse.Namespace) -> int:
    from console.cli.check import run_check

    return run_check(_services(args), args)
