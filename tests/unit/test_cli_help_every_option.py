"""Every option and positional of every verb a user can reach says what it does in --help."""

from __future__ import annotations

import argparse

from console.cli.helptext import visible_parsers
from console.cli.parser import build_parser


def test_every_option_of_every_verb_has_help_text():
    missing = []
    verbs = 0
    for path, parser in visible_parsers(build_parser()):
        verbs += 1
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                name = "/".join(action.option_strings) or action.metavar or action.dest
                missing.append(f"ddconsole {' '.join(path)}: {name}")
    assert verbs > 20  # the walk reached the sub-verbs (profiles show, runs compare, ...)
    assert not missing, "options without help text:\n" + "\n".join(missing)


def test_hidden_verbs_are_not_offered():
    names = {" ".join(path) for path, _ in visible_parsers(build_parser())}
    assert "run-request" not in names
    assert "__complete" not in names
    assert {"up", "prune", "completion", "runs show"} <= names
