"""Help text for options registered without any, so `--help` documents every option.

The verbs' own modules give most options their help; this fills the rest by verb and
destination first, then by destination alone (`--json` means the same everywhere). A test
walks the parser tree and fails on an option that still has none.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

BY_DEST: dict[str, str] = {
    "json": "machine-readable output (JSON on stdout)",
    "out": "results folder (default: the state dir's runs/)",
    "yes": "do not ask for confirmation",
    "grace": "seconds between SIGTERM and SIGKILL (default 30, SGLang drains)",
    "timeout": "give up waiting after S seconds",
}

BY_VERB: dict[tuple[str, str], str] = {
    ("diagnose", "log"): "an SGLang server log (any server's, also one ddconsole did not start)",
    ("bench", "endpoint"): "SGLang API to load: native /generate (default) or the OpenAI ones",
    ("bench", "seed"): "seed of the prompts and arrival times (default 0)",
    ("campaign", "file"): "a campaign file (TOML): cells and levels",
    ("runs show", "run"): "a run id or a unique prefix of one (see `ddconsole runs list`)",
    ("runs compare", "run_a"): "the first run (id or unique prefix)",
    ("runs compare", "run_b"): "the second run (id or unique prefix)",
    ("runs import", "file"): "SGLang bench_serving's --output-file (JSON lines)",
    ("runs import", "name"): "a name for the imported run",
    ("record", "interval"): "seconds between readings (default 1)",
}


def visible_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser a user reaches (hidden verbs, registered without help, left out), with
    its verb path (`("runs", "show")`)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            shown = {choice.dest for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if name in shown:
                    yield from visible_parsers(sub, (*path, name))


def fill_missing_help(parser: argparse.ArgumentParser) -> None:
    """Give each option without help the text from the tables above (an exact verb entry
    first); options already documented are left as they are."""
    for path, sub in visible_parsers(parser):
        verb = " ".join(path)
        for action in sub._actions:
            if action.help is not None or isinstance(action, argparse._SubParsersAction):
                continue
            text = BY_VERB.get((verb, action.dest)) or BY_DEST.get(action.dest)
            if text is not None:
                action.help = text
