"""`--gpus` for plan, up and switch: ranges counted before they are built, the limit named,
the order given kept (issue 17, F11)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from console.cli.parser import build_parser
from tests.conftest import CliResult


@pytest.mark.parametrize("verb", [["plan", "qwen3.6-27b"], ["up", "qwen3.6-27b"]])
@pytest.mark.parametrize("value", ["0-99999999999", "0-65535,70000"])
def test_a_too_large_gpu_range_says_the_limit_in_one_line(
    cli: Callable[..., CliResult], verb: list[str], value: str
) -> None:
    result = cli(*verb, "--demo", "--gpus", value)
    assert result.code == 2, result
    assert "Traceback" not in result.err
    last = result.err.strip().splitlines()[-1]
    assert last.endswith(f"error: argument --gpus: {value}: more than 65536 GPU ids"), last


@pytest.mark.parametrize(
    ("value", "said"),
    [("5-2", "runs backwards"), ("a,b", "not a GPU list"), (",", "empty GPU list")],
)
def test_a_malformed_gpu_list_is_one_line(
    cli: Callable[..., CliResult], value: str, said: str
) -> None:
    result = cli("plan", "qwen3.6-27b", "--demo", "--gpus", value)
    assert result.code == 2, result
    assert said in result.err.strip().splitlines()[-1]


def test_gpu_lists_keep_their_order_and_duplicates() -> None:
    parse = build_parser().parse_args
    assert parse(["plan", "p", "--gpus", "4-7,0"]).gpus == (4, 5, 6, 7, 0)
    assert parse(["plan", "p", "--gpus", "3,3,4"]).gpus == (3, 3, 4)
    assert parse(["up", "p", "--gpus", "0-65535"]).gpus == tuple(range(65536))
