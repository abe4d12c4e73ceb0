"""No run data passes between the modules of console/bench, console/cli and console/tui as an
untyped JSON dict: every function signature and dataclass field that takes or gives one
(`dict[str, Any]`, `JsonDict`, `JsonObject`, `Mapping[str, Any]`, `FindingJson`) is either
a `to_json`/`from_json` (the JSON boundary of a type) or named below with its reason.

This is the issue's acceptance grep (`grep -rn "dict\\[str, Any\\]" console/bench console/cli
console/tui`) made exact: aliases count too, and comments do not excuse a hit.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("console/bench", "console/cli", "console/tui")
UNTYPED = ("dict[str, Any]", "JsonDict", "JsonObject", "Mapping[str, Any]", "FindingJson")
BOUNDARY_NAMES = {"to_json", "from_json"}
"""A type's own JSON form, read or written where a file, a frame or an HTTP body is."""

ALLOWED = {
    # JSON documents of other programs or layers, kept verbatim.
    "console/bench/campaign.py:server_info": "SGLang's /server_info body as it answered",
    "console/bench/campaign.py:redact_server_info": "that body with secrets masked, verbatim",
    "console/bench/campaign.py:fingerprint": "the host fingerprint document stored in run.json",
    "console/cli/run_common.py:fingerprint": "the same fingerprint document, for the CLI",
    "console/bench/cells.py:meta_from_server_info": "reads SGLang's /server_info body",
    "console/bench/levels.py:Target.server_info": "SGLang's /server_info body, verbatim",
    "console/bench/results.py:CellMeta.plan": "the server's Plan.to_json(), kept in run.json",
    "console/bench/results.py:CellMeta.server_info": "SGLang's /server_info, kept in run.json",
    "console/bench/results.py:CellMeta.extra": "run.json keys this version does not model",
    "console/bench/runmeta.py:RunMeta.request": "the typed request's own JSON (request.py)",
    "console/bench/runmeta.py:RunMeta.workload": "the request's workload JSON, shown unread",
    "console/bench/runmeta.py:RunMeta.levels": "a bench run's planned levels as written",
    "console/bench/runmeta.py:RunMeta.spec": "the campaign spec older runs resume from",
    "console/bench/runmeta.py:RunMeta.fingerprint": "the host fingerprint document",
    "console/bench/runmeta.py:RunMeta.extra": "run.json keys this version does not model",
    "console/bench/runmeta.py:_objects": "checks run.json's `levels` entries while parsing",
    "console/bench/results.py:RunSummary.fingerprint": "the host fingerprint, passed through",
    "console/bench/results.py:RunSummary.workload": "the workload JSON, passed through",
    # Parsing helpers of the JSON boundary.
    "console/bench/results.py:_object": "parse helper of from_json",
    "console/bench/results.py:json_field": "parse helper of from_json",
    "console/bench/findings.py:finding_from_json": "summary.json's findings, parsed",
    "console/bench/sglang_import.py:_stats": "reads one figure of bench_serving's JSONL row",
    # Lines and bodies about to be written or just read.
    "console/bench/rundir.py:RunDir.append": "a JSONL line about to be written",
    "console/bench/rundir.py:RunDir.read_jsonl": "JSONL lines just read, parsed by from_json",
    "console/bench/client.py:request_body": "the HTTP body sent to the server",
    "console/bench/request.py:BenchRequest.workload_json": "run.json's workload document",
    "console/bench/request.py:CampaignRequest.workload_json": "run.json's workload document",
    "console/bench/launch.py:create_run": "`fingerprint`: the host fingerprint document",
    # Recorded documents of other layers (recordings, server status, the topology header).
    "console/tui/replay.py:topology_from_json": "a recording header's topology document",
    "console/tui/replay.py:ReplayBackend.raw_servers": "recorded server status JSON",
    "console/tui/replay.py:_State.servers": "recorded server status JSON, as the frame held it",
    "console/tui/headless.py:StaticBackend.__init__": "`servers`: server status JSON",
    "console/tui/views.py:ServerView.plan": "the server's plan JSON (status view)",
    "console/cli/cmd_metrics.py:_print_reading": "a metrics reading's --json",
    "console/cli/cmd_metrics.py:_line": "a metrics reading's --json",
    "console/cli/prom_metrics.py:prometheus_json": "the `prometheus` object of --json",
    "console/cli/prom_metrics.py:_reading": "a metrics reading's --json",
    "console/cli/prom_metrics.py:_print_targets": "that reading's `prometheus` object",
    "console/cli/cmd_profiles.py:_entry_json": "a profile listing's --json",
    "console/bench/findings.py:_finding_json": "a finding's summary.json form (its to_json)",
    "console/bench/facts.py:finding_json": "a finding's summary.json form (its to_json)",
    "console/bench/sglang_import.py:_number": "reads a bench_serving JSONL row (SGLang's)",
    "console/bench/sglang_import.py:_count": "reads a bench_serving JSONL row (SGLang's)",
    "console/bench/sglang_import.py:_ms": "reads a bench_serving JSONL row (SGLang's)",
    "console/bench/sglang_import.py:_level": "reads a bench_serving JSONL row (SGLang's)",
    "console/cli/cmd_snapshot.py:_gather_live": "returns the snapshot's JSON document",
    "console/cli/cmd_snapshot.py:_gather_recording": "returns the snapshot's JSON document",
}


def hits() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            words = UNTYPED + _aliases(tree)
            found += [f"{rel}:{name}" for name in _untyped(tree, "", words)]
    return found


def _aliases(tree: ast.Module) -> tuple[str, ...]:
    """Module-level names that stand for an untyped dict (`Gathered = tuple[dict[str, Any],
    ...]`): an annotation using one counts as using the dict."""
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and _mentions(node.value, UNTYPED):
                names.append(target.id)
    return tuple(names)


def _untyped(node: ast.AST, prefix: str, words: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            fields = [
                (item.target.id, item.annotation)
                for item in child.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            ]
            out += [f"{prefix}{child.name}.{name}" for name, a in fields if _mentions(a, words)]
            out += _untyped(child, f"{prefix}{child.name}.", words)
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            if child.name in BOUNDARY_NAMES:
                continue
            args = child.args
            annotations = [
                a.annotation
                for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
                if a is not None and a.annotation is not None
            ]
            if child.returns is not None:
                annotations.append(child.returns)
            if any(_mentions(a, words) for a in annotations):
                out.append(f"{prefix}{child.name}")
    return out


def _mentions(annotation: ast.expr, words: tuple[str, ...]) -> bool:
    text = ast.unparse(annotation).replace("'", "").replace('"', "")
    return any(word in text for word in words)


def test_no_run_data_travels_as_an_untyped_dict() -> None:
    unexpected = [hit for hit in hits() if hit not in ALLOWED]
    assert unexpected == [], "untyped JSON dicts outside the boundary: " + ", ".join(unexpected)


def test_the_allow_list_names_only_what_exists() -> None:
    stale = sorted(set(ALLOWED) - set(hits()))
    assert stale == [], "allowed but no longer there (remove them): " + ", ".join(stale)
