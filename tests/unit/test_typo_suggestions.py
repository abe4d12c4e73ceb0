"""A mistyped verb, sub-verb, choice or flag is answered by the parser it was meant for,
with the closest valid spelling (exit status 2, no traceback)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("argv", "usage", "expected"),
    [
        (["plna", "x"], "usage: ddconsole ", "unknown command 'plna'; did you mean 'plan'?"),
        (["stauts"], "usage: ddconsole ", "unknown command 'stauts'; did you mean 'ps'?"),
        (["profiles", "lsit"], "usage: ddconsole profiles", "did you mean 'list'?"),
        (["runs", "shwo", "x"], "usage: ddconsole runs", "did you mean 'show'?"),
        (
            ["bench", "--server", "x", "--concurency", "4"],
            "usage: ddconsole bench",
            "unrecognized option '--concurency'; did you mean '--concurrency'?",
        ),
        (
            # The README's example: the mistyped flag is named before the missing --server.
            ["bench", "--concurency", "4", "--demo"],
            "usage: ddconsole bench",
            "unrecognized option '--concurency'; did you mean '--concurrency'?",
        ),
        (
            # --host after the verb: where it goes, not a spelling of another flag.
            ["ps", "--host", "alpha"],
            "usage: ddconsole ps",
            "--host is given before the command, as `ddconsole --host NAME ps ...`",
        ),
        (
            ["runs", "list", "--host=alpha"],
            "usage: ddconsole runs list",
            "--host is given before the command, as `ddconsole --host NAME runs list ...`",
        ),
        (
            ["up", "--layuot", "tp1"],  # before the missing PROFILE too
            "usage: ddconsole up",
            "unrecognized option '--layuot'; did you mean '--layout'?",
        ),
        (
            ["up", "qwen3.6-27b", "--layuot=tp1"],
            "usage: ddconsole up",
            "unrecognized option '--layuot'; did you mean '--layout'?",
        ),
        (
            ["bench", "--server", "x", "--endpoint", "chta"],
            "usage: ddconsole bench",
            "invalid choice: 'chta'; did you mean 'chat'?",
        ),
        (["completion", "bsh"], "usage: ddconsole completion", "did you mean 'bash'?"),
    ],
)
def test_typos_get_the_closest_spelling_from_their_own_parser(cli, argv, usage, expected):
    result = cli(*argv)
    assert result.code == 2
    assert expected in result.err
    # The verb's own usage line, not the top-level one (F20 of the new-user trial).
    assert result.err.startswith(usage)
    assert "Traceback" not in result.err


def test_hidden_verbs_are_not_listed_in_the_choices(cli):
    result = cli("nosuchverb")
    assert result.code == 2
    assert "run-request" not in result.err
    assert "__complete" not in result.err
    assert "prune" in result.err


def test_a_stray_positional_is_still_named(cli):
    result = cli("ps", "extra")
    assert result.code == 2
    assert "unrecognized arguments: extra" in result.err
