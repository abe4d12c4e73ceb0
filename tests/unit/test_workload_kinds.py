"""Workload kinds, trace files, workloads by name, and the simulator's prefix cache."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from console.bench import workload_kinds, workload_trace
from console.bench.workload import Workload
from console.bench.workload_files import resolve, shipped_workloads_dir, workload_names
from console.bench.workload_kinds import (
    CHAT_INPUT,
    CHAT_OUTPUT,
    LengthDistribution,
    MultiTurn,
    SharedPrefix,
)
from console.bench.workload_trace import MOONCAKE_BLOCK, PieceCache, TraceReplay, load_trace
from console.core.errors import UsageError
from console.sim.prefix import BLOCK, PrefixCache, id_keys, text_keys


def test_chat_lengths_follow_the_stated_medians_and_long_tail():
    prompts = LengthDistribution().prompts(0, 0, 3000)
    inputs = [p.input_len for p in prompts]
    outputs = [p.output_len for p in prompts]
    assert abs(statistics.median(inputs) / CHAT_INPUT.median - 1) < 0.1
    assert abs(statistics.median(outputs) / CHAT_OUTPUT.median - 1) < 0.1
    # Long-tailed: p90 well above the median (sigma 1.0: ~3.6x).
    assert sorted(inputs)[2700] > 2.5 * statistics.median(inputs)
    assert all(len(p.input_ids or ()) == p.input_len for p in prompts[:50])


def test_prompts_are_the_same_per_salt_and_position_and_differ_across_salts():
    source = LengthDistribution()
    whole = source.prompts(3, 0, 10)
    assert source.prompts(3, 4, 3) == whole[4:7]
    assert source.prompts(4, 0, 10) != whole


def test_shared_prefix_groups_share_exactly_their_system_prompt():
    source = SharedPrefix(prefix_len=100, groups=3)
    prompts = source.prompts(0, 0, 6)
    ids = [p.input_ids or () for p in prompts]
    assert ids[0][:100] == ids[3][:100]
    assert ids[1][:100] == ids[4][:100]
    assert ids[0][:100] != ids[1][:100]
    assert ids[0][100:] != ids[3][100:]
    assert all(p.input_len == len(i) > 100 for p, i in zip(prompts, ids, strict=True))


def test_multi_turn_prompt_grows_by_every_earlier_turn_round_robin():
    source = MultiTurn(conversations=3, turns=4, system_len=50)
    prompts = source.prompts(0, 0, 12)
    assert [source.turn_of(i) for i in range(5)] == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1)]
    # Past conversations x turns requests, new conversations begin.
    assert source.turn_of(12) == (3, 0)
    for index in range(3, 12):
        earlier = prompts[index - 3].input_ids or ()
        now = prompts[index].input_ids or ()
        # The earlier prompt, then that turn's answer (its output length), then a new message.
        assert now[: len(earlier)] == earlier
        assert len(now) > len(earlier) + prompts[index - 3].output_len
    assert prompts[0].input_ids[:50] != prompts[1].input_ids[:50]  # type: ignore[index]


def _write(tmp_path: Path, name: str, rows: list[object]) -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_jsonl_trace_rows_share_their_group_prefix(tmp_path: Path):
    path = _write(
        tmp_path,
        "t.jsonl",
        [
            {
                "timestamp": 10.0,
                "input_len": 100,
                "output_len": 5,
                "prefix_group": "a",
                "prefix_len": 64,
            },
            {
                "timestamp": 10.5,
                "input_len": 80,
                "output_len": 5,
                "prefix_group": "a",
                "prefix_len": 32,
            },
            {"timestamp": 12.0, "input_len": 90, "output_len": 7},
        ],
    )
    trace = load_trace(path)
    assert [r.at_s for r in trace.rows] == [0.0, 0.5, 2.0]
    prompts = TraceReplay(trace).prompts(0, 0, 3)
    assert [p.at_s for p in prompts] == [0.0, 0.5, 2.0]
    assert [p.input_len for p in prompts] == [100, 80, 90]
    a, b, c = (p.input_ids or () for p in prompts)
    assert a[:32] == b[:32]
    assert a[32:64] != b[32:64]
    assert c[:32] != a[:32]


def test_mooncake_hash_ids_are_identical_512_token_blocks(tmp_path: Path):
    path = _write(
        tmp_path,
        "m.jsonl",
        [
            {"timestamp": 0, "input_length": 1000, "output_length": 9, "hash_ids": [7, 8]},
            {"timestamp": 250, "input_length": 1200, "output_length": 3, "hash_ids": [7, 9, 4]},
        ],
    )
    trace = load_trace(path)
    assert trace.format == "mooncake"
    assert [r.at_s for r in trace.rows] == [0.0, 0.25]
    first, second = TraceReplay(trace).prompts(0, 0, 2)
    one, two = first.input_ids or (), second.input_ids or ()
    assert (len(one), len(two)) == (1000, 1200)
    assert one[:MOONCAKE_BLOCK] == two[:MOONCAKE_BLOCK]
    assert one[MOONCAKE_BLOCK:] != two[MOONCAKE_BLOCK:1000]
    assert (first.output_len, second.output_len) == (9, 3)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (['{"timestamp": 1, "input_len": 5'], "line 1: not a JSON object"),
        (
            [
                {"timestamp": 2, "input_len": 5, "output_len": 1},
                {"timestamp": 1, "input_len": 5, "output_len": 1},
            ],
            'line 2: "timestamp" 1 is earlier than the line before (2)',
        ),
        (
            [{"timestamp": 0, "input_len": 0, "output_len": 1}],
            'line 1: "input_len" must be a whole',
        ),
        (
            [{"timestamp": "x", "input_len": 3, "output_len": 1}],
            'line 1: "timestamp" must be a number',
        ),
        ([{"timestamp": 0, "input_len": 3}], 'line 1: "output_len" must be a whole'),
        (
            [{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": ["a"]}],
            'line 1: "hash_ids" must be a list of whole numbers',
        ),
        (
            [
                {"timestamp": 0, "input_len": 3, "output_len": 1},
                "",
                {"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": []},
            ],
            "line 3: a mooncake row in a jsonl trace",
        ),
        ([""], "no requests in the file"),
    ],
)
def test_bad_trace_lines_name_the_file_line_and_field(
    tmp_path: Path, rows: list[object], message: str
):
    path = _write(tmp_path, "bad.jsonl", rows)
    with pytest.raises(UsageError) as caught:
        load_trace(path)
    assert str(caught.value).startswith(f"--trace {path}: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_workloads_by_name_builtin_shipped_and_path(tmp_path: Path):
    names = workload_names()
    assert {"random", "chat", "shared-prefix", "multi-turn"} <= set(names)
    shipped = {p.stem for p in shipped_workloads_dir().glob("*.jsonl")}
    assert shipped == {"chat-prompts", "chat-trace", "mooncake-agent"}
    assert shipped <= set(names)
    base = Workload(seed=3)
    assert resolve("random", base) is base
    assert resolve("chat-trace", base).timed
    assert resolve("mooncake-agent", base).timed
    dataset = resolve("chat-prompts", base)
    assert not dataset.timed
    assert len(dataset.prompts_from_file) == 40
    assert isinstance(resolve("multi-turn", base).source, MultiTurn)
    own = _write(tmp_path, "mine.jsonl", [{"timestamp": 0, "input_len": 4, "output_len": 2}])
    assert resolve(str(own), base).timed
    with pytest.raises(UsageError, match=r"^--workload nope: unknown workload \(known: random"):
        resolve("nope", base)


def test_shipped_traces_load_and_replay_in_order():
    for name in ("chat-trace", "mooncake-agent"):
        source = resolve(name, Workload()).source
        assert isinstance(source, TraceReplay)
        prompts = source.prompts(0, 0, len(source))
        times = [p.at_s or 0.0 for p in prompts]
        assert times == sorted(times)
        assert times[-1] > 20


def test_prefix_cache_matches_whole_blocks_capped_below_the_prompt():
    cache = PrefixCache()
    ids = list(range(1, 101))  # 6 whole blocks of 16, 4 ids left over
    keys = id_keys(ids)
    assert len(keys.keys) == 100 // BLOCK
    assert cache.match(keys) == 0
    cache.insert(keys, room_tokens=10_000)
    assert keys.tokens(cache.match(keys), 100) == 96
    # A prompt of exactly 6 blocks matches 95 tokens: one is always computed.
    exact = id_keys(ids[:96])
    assert exact.tokens(cache.match(exact), 96) == 95
    # A different first block shares nothing, however much follows.
    assert cache.match(id_keys([0, *ids[1:]])) == 0
    cache.clear()
    assert cache.match(keys) == 0


def test_prefix_cache_evicts_least_recently_used_leaves_first():
    cache = PrefixCache()
    a = id_keys(list(range(64)))  # 4 blocks
    b = id_keys(list(range(1000, 1064)))
    cache.insert(a, room_tokens=128)
    cache.insert(b, room_tokens=128)
    assert cache.match(a) == 4  # a is now the most recently used
    c = id_keys(list(range(2000, 2032)))  # 2 blocks: evict 2 of b's, its leaves
    cache.insert(c, room_tokens=128)
    assert cache.tokens == 128
    assert cache.match(a) == 4
    assert cache.match(b) == 2
    assert cache.match(c) == 2


def test_prefix_cache_off_and_text_blocks():
    off = PrefixCache(enabled=False)
    keys = id_keys(list(range(64)))
    off.insert(keys, room_tokens=1e9)
    assert off.match(keys) == 0
    cache = PrefixCache()
    text = "x" * 640
    first = text_keys(text, 160)  # 10 blocks of 64 chars, 16 tokens each
    cache.insert(first, 1e9)
    longer = text_keys(text + "y" * 640, 320)
    assert longer.tokens(cache.match(longer), 320) == 160


def test_builtin_kinds_take_parameters():
    source = resolve("multi-turn:turns=8,conversations=16,answer_median=50", Workload()).source
    assert isinstance(source, MultiTurn)
    assert (source.turns, source.conversations, source.answer.median) == (8, 16, 50)
    shared = resolve("shared-prefix:prefix_len=300,groups=2", Workload()).source
    assert isinstance(shared, SharedPrefix)
    assert (shared.prefix_len, shared.groups) == (300, 2)
    chat = resolve("chat:input_median=2000", Workload()).source
    assert isinstance(chat, LengthDistribution)
    assert chat.input.median == 2000
    with pytest.raises(UsageError) as caught:
        resolve("multi-turn:foo=1", Workload())
    assert str(caught.value) == (
        "--workload multi-turn:foo=1: unknown parameter 'foo' (multi-turn takes conversations,"
        " turns, system_len, message_median, answer_median)"
    )
    with pytest.raises(UsageError, match="groups must be a whole number, not 'x'"):
        resolve("shared-prefix:groups=x", Workload())


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "shared-prefix:prefix_len=99999999",
            "--workload shared-prefix:prefix_len=99999999: prefix_len must be from 1 to 2000000,"
            " not 99999999",
        ),
        (
            "shared-prefix:prefix_len=1999000",
            "--workload shared-prefix:prefix_len=1999000: prefix_len 1999000 plus the longest"
            " question (4096) is over 2000000 tokens; lower prefix_len",
        ),
        (
            "multi-turn:turns=1000",
            "--workload multi-turn:turns=1000: the last of 1000 turns over a 512-token system"
            " prompt can reach 4094464 tokens, over 2000000; lower turns or system_len",
        ),
        (
            "chat:input_median=99999",
            "--workload chat:input_median=99999: input_median must be from 4 to 16384 (the"
            " input length's bounds), not 99999",
        ),
        (
            "multi-turn:turns=8,turns=9",
            "--workload multi-turn:turns=8,turns=9: turns is given twice; give each parameter once",
        ),
    ],
)
def test_builtin_parameters_are_capped_and_given_once(name: str, message: str):
    with pytest.raises(UsageError) as caught:
        resolve(name, Workload())
    assert str(caught.value) == message


def test_builtin_parameters_at_their_caps_are_accepted():
    shared = resolve("shared-prefix:prefix_len=1995904", Workload()).source
    assert isinstance(shared, SharedPrefix)
    assert shared.prefix_len == 1995904
    turns = resolve("multi-turn:turns=488", Workload()).source
    assert isinstance(turns, MultiTurn)
    assert turns.turns == 488


def test_trace_blocks_are_drawn_once_across_prompt_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A replay asks for one prompt at a time: a block or group prefix seen in an earlier
    call comes from the cache, and is the same ids a fresh replay draws."""
    rows: list[object] = [
        {"timestamp": t, "input_length": 1536, "output_length": 4, "hash_ids": [1, 2, 3 + t]}
        for t in range(4)
    ]
    trace = load_trace(_write(tmp_path, "m.jsonl", rows))
    fresh = TraceReplay(trace).prompts(5, 0, 4)
    drawn: list[tuple[object, ...]] = []
    real = workload_kinds.keyed_ids

    def counting(vocab: int, count: int, *key: object) -> tuple[int, ...]:
        drawn.append(key)
        return real(vocab, count, *key)

    monkeypatch.setattr(workload_trace, "keyed_ids", counting)
    replay = TraceReplay(trace)
    one_at_a_time = [replay.prompts(5, index, 1)[0] for index in range(4)]
    assert one_at_a_time == fresh
    blocks = [int(str(key[3])) for key in drawn if key[0] == "block"]
    assert sorted(blocks) == [1, 2, 3, 4, 5, 6]  # blocks 1 and 2 once, not four times


def test_piece_cache_drops_the_least_recently_used_past_its_limit():
    cache = PieceCache(limit=10)
    cache.get("a", lambda: (1,) * 4)
    cache.get("b", lambda: (2,) * 4)
    cache.get("a", lambda: (9,))  # a hit: "a" is now the most recent
    assert cache.get("c", lambda: (3,) * 4) == (3,) * 4
    assert (len(cache), cache.tokens) == (2, 8)
    assert cache.get("a", lambda: (9,)) == (1,) * 4
    assert cache.get("b", lambda: (7,)) == (7,)  # dropped, so made again
