"""Run results as types: a level's record, its summary, a cell, a run, the best per level.

Each type is frozen and keyword-only, with `to_json` (the `summary.json` / `levels.jsonl`
form) and a tolerant `from_json` that raises `ValueError` on a document it cannot read.
`summary.py` computes these from a run's files; `tables.py` renders them; the screens, the
CLI and the snapshot read them. Nothing between those modules is keyed by strings.

`summary.json` schema versions (`RunSummary.SCHEMA_VERSION`):

- 1: the run (`run_id`, `run_dir`, `name`, `kind`, `status`, `created_wall`, `fingerprint`,
  `time_scale`, `workload`), its `cells` (each with its level summaries: the fields of
  `LevelSummary` in declared order, a `Stats` field flattened to `{name}_p50_s` ..
  `{name}_count`, `chunk_accept_mismatch` and `accept_length_note` only when set), `best` and
  `findings`. Levels imported from SGLang's bench_serving carry every level key, null where
  bench_serving reports no number.
- 2: each level summary gains `accept_ratio` (its last key): accepted tokens per step /
  verify tokens per step. A failed level's summary also carries `reason` (after `status`,
  only when set): why it failed; a reader that finds none takes the most common of
  `error_kinds`.
- 3: each level summary gains, after `accept_ratio`, its acceptance distribution:
  `correct_drafts_histogram` (verify steps by drafts accepted in each, summed over the
  level's requests whose final chunk carried SGLang's `spec_correct_drafts_histogram`),
  `correct_drafts_requests` (how many did), `accept_drop_position` (the first draft
  position fewer than half of the steps accepted) and `accept_length_p10` / `_p50` /
  `_p90` (per-request acceptance length percentiles); each null when not measured. A
  level of a dp > 1 server also carries `dp_ranks` (per-rank requests, output tok/s,
  per-request decode speed, acceptance; written only when known). Each cell gains
  `tree_budget` and `tree_flag` (a tree-drafting budget and the flag that passed it,
  DDTree's included). Findings gain the kinds `budget-scaling`, `batching-efficiency` and
  `dp-rank-imbalance`.

A `summary.json` of another version, or one that does not parse, is never trusted: the
loader (`summary.load_summary`) rebuilds it from the run's files.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from console.bench.findings import CellFacts, Finding, LevelFacts, finding_from_json
from console.bench.rank_facts import RankLevel

# A JSON document as `json.loads` returns it: the parse boundary, where `from_json` reads.
# Also the type of the two documents a run records verbatim and the summary passes through
# unread (`fingerprint`, `workload`: what was asked and where), and of `server_info`.
JsonObject = Mapping[str, Any]
# A JSON object being built at a boundary: what `to_json` returns, a file line or document
# about to be written (run.json, levels.jsonl, summary.json, a recording frame), an HTTP
# body, or another layer's document kept verbatim (a server's plan, its /server_info). Run
# data passed between modules is the types below, never this.
JsonDict = dict[str, Any]


def _opt_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _opt_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value)


def histogram_counts(value: object) -> tuple[int, ...] | None:
    """A list of non-negative counts (a histogram), else None."""
    if not isinstance(value, list) or not value:
        return None
    counts = [_opt_int(item) for item in value]
    if any(count is None or count < 0 for count in counts):
        return None
    return tuple(count for count in counts if count is not None)


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _object(value: object) -> JsonObject:
    return value if isinstance(value, Mapping) else {}


# -- what a level recorded ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Counters:
    """SGLang's counters read from `/metrics` just before or after a level."""

    spec_verify_calls: float | None = None
    generation_tokens: float | None = None
    decode_tokens: float | None = None
    requests: float | None = None
    accept_length_gauge: float | None = None
    """`sglang:spec_accept_length` (mean over the server's ranks that report one)."""
    workers: tuple[str, ...] = ()
    """Through SGLang's model gateway: the workers (`worker_addr`) whose `/engine_metrics`
    counters are summed here; empty for one server's own `/metrics`."""
    worker_generation_tokens: tuple[float, ...] = ()
    """Each of `workers`' own `sglang:generation_tokens_total`, in their order: a worker
    that restarted between two readings (its counters back to zero) is seen in them even
    while the sum still grows."""
    worker_requests: tuple[float, ...] = ()
    """Each of `workers`' own `sglang:num_requests_total`, in their order."""

    def to_json(self) -> dict[str, float | list[str] | list[float] | None]:
        data: dict[str, float | list[str] | list[float] | None] = {
            name: getattr(self, name) for name in COUNTER_FIELDS
        }
        if self.workers:
            data["workers"] = list(self.workers)
            data["worker_generation_tokens"] = list(self.worker_generation_tokens)
            data["worker_requests"] = list(self.worker_requests)
        return data

    @classmethod
    def from_json(cls, data: object) -> Counters | None:
        """None for a level whose counters could not be read (`{}` on disk)."""
        if not isinstance(data, Mapping) or not data:
            return None
        workers = data.get("workers")
        return cls(
            **{name: _opt_float(data.get(name)) for name in COUNTER_FIELDS},
            workers=tuple(w for w in workers if isinstance(w, str))
            if isinstance(workers, list)
            else (),
            worker_generation_tokens=_floats(data.get("worker_generation_tokens")),
            worker_requests=_floats(data.get("worker_requests")),
        )

    def delta(self, after: Counters | None, name: str) -> float | None:
        """`after - self` for one counter; None when either is missing, it went back (a
        server restarted between the readings), or a gateway's workers changed between them
        (a sum over other workers is no increase)."""
        a = getattr(self, name)
        b = None if after is None else getattr(after, name)
        if a is None or b is None or b < a:
            return None
        if after is not None and after.workers != self.workers:
            return None
        if after is not None and _a_worker_went_back(self, after):
            return None
        return float(b - a)


def _floats(value: object) -> tuple[float, ...]:
    """A JSON list of numbers (anything else: none)."""
    if not isinstance(value, list):
        return ()
    return tuple(float(v) for v in value if isinstance(v, int | float) and not isinstance(v, bool))


def _a_worker_went_back(before: Counters, after: Counters) -> bool:
    """A gateway's worker whose own counter fell between the readings: it restarted, and
    the sum's increase leaves out what it had counted before."""
    then, now = before.worker_generation_tokens, after.worker_generation_tokens
    if not before.workers or len(then) != len(before.workers) or len(now) != len(then):
        return False
    return any(b < a for a, b in zip(then, now, strict=True))


COUNTER_FIELDS = (
    "spec_verify_calls",
    "generation_tokens",
    "decode_tokens",
    "requests",
    "accept_length_gauge",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelRecord:
    """One `levels.jsonl` line: a finished (or interrupted) level of one cell."""

    cell: str
    level: int
    attempt: int = 1
    label: str | None = None
    concurrency: int | None = None
    rate: float | None = None
    requests_planned: int | None = None
    started_wall: float | None = None
    ended_wall: float | None = None
    wall_s: float | None = None
    """Real seconds from the first send to the last completion."""
    time_scale: float = 1.0
    """Server seconds per real second (a simulator may run faster than life)."""
    counters_before: Counters | None = None
    counters_after: Counters | None = None
    status: str = "done"
    error: str | None = None
    flush_error: str | None = None
    early_stop: str | None = None
    """Why a saturation search stopped the level before its planned requests (it had
    already failed the SLO, or a rate level ran past its drain limit); a level stopped so is
    done, not interrupted."""
    achieved_rate: float | None = None
    """A rate search level's completions per server second over [first completion, last
    send) (`find_max.Pace.achieved`); None for other levels."""
    sent_rate: float | None = None
    """Its requests sent per server second, first send to last (`Pace.sent_rate`)."""
    behind: str | None = None
    """Why it fails on pace, `fell behind: ...` (`Pace.behind`); None when it kept up."""

    def to_json(self) -> JsonDict:
        return {
            "cell": self.cell,
            "level": self.level,
            "attempt": self.attempt,
            "label": self.label,
            "concurrency": self.concurrency,
            "rate": self.rate,
            "requests_planned": self.requests_planned,
            "started_wall": self.started_wall,
            "ended_wall": self.ended_wall,
            "wall_s": self.wall_s,
            "time_scale": self.time_scale,
            "counters_before": self.counters_before.to_json() if self.counters_before else {},
            "counters_after": self.counters_after.to_json() if self.counters_after else {},
            "status": self.status,
            "error": self.error,
            "flush_error": self.flush_error,
            "early_stop": self.early_stop,
            # Rate search levels only: absent from other levels' lines.
            **{
                key: value
                for key, value in (
                    ("achieved_rate", self.achieved_rate),
                    ("sent_rate", self.sent_rate),
                    ("behind", self.behind),
                )
                if value is not None
            },
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> LevelRecord:
        level = _opt_int(data.get("level"))
        if level is None:
            raise ValueError("a level line without its level number")
        return cls(
            cell=str(data.get("cell")),
            level=level,
            attempt=_opt_int(data.get("attempt")) or 1,
            label=_opt_str(data.get("label")),
            concurrency=_opt_int(data.get("concurrency")),
            rate=_opt_float(data.get("rate")),
            requests_planned=_opt_int(data.get("requests_planned")),
            started_wall=_opt_float(data.get("started_wall")),
            ended_wall=_opt_float(data.get("ended_wall")),
            wall_s=_opt_float(data.get("wall_s")),
            time_scale=_opt_float(data.get("time_scale")) or 1.0,
            counters_before=Counters.from_json(data.get("counters_before")),
            counters_after=Counters.from_json(data.get("counters_after")),
            status=str(data.get("status") or "done"),
            error=_opt_str(data.get("error")),
            flush_error=_opt_str(data.get("flush_error")),
            early_stop=_opt_str(data.get("early_stop")),
            achieved_rate=_opt_float(data.get("achieved_rate")),
            sent_rate=_opt_float(data.get("sent_rate")),
            behind=_opt_str(data.get("behind")),
        )


def json_field(data: JsonObject, key: str, kinds: tuple[type, ...], where: str) -> Any:
    """`data[key]` when absent, null or of one of `kinds`; ValueError naming the key
    otherwise (a bool is not a number here)."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) and bool not in kinds:
        raise ValueError(f"{where}{key}: {value!r} is not {_kind_names(kinds)}")
    if not isinstance(value, kinds):
        raise ValueError(
            f"{where}{key}: {type(value).__name__} {value!r:.40} is not {_kind_names(kinds)}"
        )
    return value


def _kind_names(kinds: tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true/false",
             list: "a list", dict: "an object"}  # fmt: skip
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


NUMBER = (int, float)


@dataclass(frozen=True, slots=True, kw_only=True)
class CellMeta:
    """One cell as `run.json` records it: what it is, the server it ran on and how it went.

    `plan` (the server's `Plan.to_json()`) and `server_info` (its /server_info, redacted)
    are other layers' documents kept verbatim; keys this type does not model are kept in
    `extra` and written back unchanged. Optional keys are written only when set (a reader
    takes an absent key as null).
    """

    cell_id: str
    profile: str | None = None
    layout: str | None = None
    variant: str | None = None
    algorithm: str | None = None
    architecture: str | None = None
    ddtree_budget: int | None = None
    tree_budget: int | None = None
    """A tree-drafting budget other than DDTREE's, passed with `tree_flag`."""
    tree_flag: str | None = None
    num_draft_tokens: int | None = None
    tp: int | None = None
    server_id: str | None = None
    url: str | None = None
    status: str = "pending"
    reason: str | None = None
    gpus: tuple[int, ...] = ()
    plan: JsonObject | None = None
    server_info: JsonObject | None = None
    sglang_version: str | None = None
    time_scale: float | None = None
    extra: JsonObject = field(default_factory=dict)

    KEYS: ClassVar[tuple[str, ...]] = (
        "cell_id", "profile", "layout", "variant", "algorithm", "architecture",
        "ddtree_budget", "tree_budget", "tree_flag", "num_draft_tokens", "tp", "server_id",
        "url", "status", "reason",
        "gpus", "plan", "server_info", "sglang_version", "time_scale",
    )  # fmt: skip
    ALWAYS: ClassVar[tuple[str, ...]] = ("cell_id", "profile", "layout", "variant")

    @property
    def server_dp_size(self) -> int | None:
        """`dp_size` from the server's /server_info: which DP ranks a level may name."""
        return _opt_int(_object(self.server_info).get("dp_size"))

    @property
    def server_draft_tokens(self) -> int | None:
        """`speculative_num_draft_tokens` from the server's /server_info."""
        return _opt_int(_object(self.server_info).get("speculative_num_draft_tokens"))

    def to_json(self) -> JsonDict:
        out: JsonDict = {}
        for key in self.KEYS:
            value = getattr(self, key)
            if key in self.ALWAYS or (value is not None and value != ()):
                out[key] = list(value) if isinstance(value, tuple) else value
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out

    @classmethod
    def from_json(cls, data: JsonObject, where: str = "") -> CellMeta:
        """ValueError naming the key (after `where`) for a field of the wrong type."""
        if not isinstance(data, Mapping):
            raise ValueError(f"{where.rstrip('.: ') or 'cell'}: not an object")
        cell_id = json_field(data, "cell_id", (str,), where)
        if cell_id is None:
            raise ValueError(f"{where}cell_id: missing")
        gpus = json_field(data, "gpus", (list,), where) or []
        if not all(isinstance(g, int) and not isinstance(g, bool) for g in gpus):
            raise ValueError(f"{where}gpus: {gpus!r:.40} is not a list of GPU indices")
        scale = json_field(data, "time_scale", NUMBER, where)
        return cls(
            cell_id=cell_id,
            profile=json_field(data, "profile", (str,), where),
            layout=json_field(data, "layout", (str,), where),
            variant=json_field(data, "variant", (str,), where),
            algorithm=json_field(data, "algorithm", (str,), where),
            architecture=json_field(data, "architecture", (str,), where),
            ddtree_budget=json_field(data, "ddtree_budget", (int,), where),
            tree_budget=json_field(data, "tree_budget", (int,), where),
            tree_flag=json_field(data, "tree_flag", (str,), where),
            num_draft_tokens=json_field(data, "num_draft_tokens", (int,), where),
            tp=json_field(data, "tp", (int,), where),
            server_id=json_field(data, "server_id", (str,), where),
            url=json_field(data, "url", (str,), where),
            status=json_field(data, "status", (str,), where) or "pending",
            reason=json_field(data, "reason", (str,), where),
            gpus=tuple(gpus),
            plan=json_field(data, "plan", (dict,), where),
            server_info=json_field(data, "server_info", (dict,), where),
            sglang_version=json_field(data, "sglang_version", (str,), where),
            time_scale=None if scale is None else float(scale),
            extra={k: v for k, v in data.items() if k not in cls.KEYS},
        )


CANCELLED = "cancelled: the run was stopped"
"""The error of a request still in flight when its run was stopped (Ctrl-C, `runs stop`, its
server stopped from outside): recorded so the stop loses no request, left out of the level's
figures (it says nothing about the server)."""


@dataclass(kw_only=True)
class RequestResult:
    """A request as measured; durations in the server's seconds (real time x time scale).

    Mutable while its stream is read (the client fills it chunk by chunk, on the hot path);
    once kept it is only read.
    """

    send_wall: float
    ttft_s: float | None = None
    e2e_s: float | None = None
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    input_len: int | None = None
    """The prompt's length in token ids as sent, for a request whose body carried ids (None
    for text, whose length in tokens is the server's to count)."""
    send_late_s: float | None = None
    """A trace replay's request: how long after its time on the trace's clock it went out,
    in real seconds; None for other levels."""
    chunks: int = 0
    token_chunks: int = 0
    itl_s: float | None = None
    chunk_gaps_us: array[int] = field(default_factory=lambda: array("q"))
    spec_verify_ct: int | None = None
    accept_length: float | None = None
    spec_correct_drafts_histogram: tuple[int, ...] | None = None
    """From the final chunk: index k counts the verify steps that accepted exactly k drafts
    (bonus token excluded); None when the server sent none."""
    finish_reason: str | None = None
    error: str | None = None
    dp_rank: int | None = None
    """The DP rank that served it (native `meta_info["dp_rank"]`); None on a dp-1 server or
    an endpoint that does not say."""

    @property
    def tokens_per_chunk(self) -> float | None:
        if not self.output_tokens or not self.token_chunks:
            return None
        return self.output_tokens / self.token_chunks

    def to_json(self) -> JsonDict:
        return {
            "send_wall": self.send_wall,
            "ttft_s": self.ttft_s,
            "e2e_s": self.e2e_s,
            "output_tokens": self.output_tokens,
            "prompt_tokens": self.prompt_tokens,
            "input_len": self.input_len,
            "send_late_s": self.send_late_s,
            "chunks": self.chunks,
            "token_chunks": self.token_chunks,
            "tokens_per_chunk": self.tokens_per_chunk,
            "itl_s": self.itl_s,
            "chunk_gaps_us": list(self.chunk_gaps_us),
            "spec_verify_ct": self.spec_verify_ct,
            "accept_length": self.accept_length,
            "spec_correct_drafts_histogram": (
                None
                if self.spec_correct_drafts_histogram is None
                else list(self.spec_correct_drafts_histogram)
            ),
            "finish_reason": self.finish_reason,
            "error": self.error,
            "dp_rank": self.dp_rank,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestResult:
        """Read back from a `requests.jsonl` line (its cell, level and index are ignored)."""

        def num(name: str) -> float | None:
            return _opt_float(data.get(name))

        def count(name: str) -> int | None:
            return _opt_int(data.get(name))

        gaps = data.get("chunk_gaps_us")
        error = data.get("error")
        reason = data.get("finish_reason")
        return cls(
            send_wall=num("send_wall") or 0.0,
            ttft_s=num("ttft_s"),
            e2e_s=num("e2e_s"),
            output_tokens=count("output_tokens"),
            prompt_tokens=count("prompt_tokens"),
            input_len=count("input_len"),
            send_late_s=num("send_late_s"),
            chunks=count("chunks") or 0,
            token_chunks=count("token_chunks") or 0,
            itl_s=num("itl_s"),
            chunk_gaps_us=array("q", gaps if isinstance(gaps, list) else ()),
            spec_verify_ct=count("spec_verify_ct"),
            accept_length=num("accept_length"),
            spec_correct_drafts_histogram=histogram_counts(
                data.get("spec_correct_drafts_histogram")
            ),
            finish_reason=None if reason is None else str(reason),
            error=None if error is None else str(error),
            dp_rank=count("dp_rank"),
        )


# -- what was measured -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats:
    """Percentiles (linear interpolation), mean, min, max and count of one quantity."""

    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    count: int | None = None

    def to_json(self, name: str, unit: str = "s") -> dict[str, float | int | None]:
        """Flat keys: `{name}_p50_{unit}` .. `{name}_max_{unit}`, then `{name}_count`."""
        out: dict[str, float | int | None] = {
            f"{name}_{f.name}_{unit}": getattr(self, f.name)
            for f in fields(self)
            if f.name != "count"
        }
        out[f"{name}_count"] = self.count
        return out

    @classmethod
    def from_json(cls, data: JsonObject, name: str, unit: str = "s") -> Stats:
        values = {
            f.name: _opt_float(data.get(f"{name}_{f.name}_{unit}"))
            for f in fields(cls)
            if f.name != "count"
        }
        return cls(**values, count=_opt_int(data.get(f"{name}_count")))


# Readers of one JSON value per declared annotation; `LevelSummary.from_json` uses the
# field's annotation, so a new field of a known type reads back with no code.
_READERS: dict[str, Callable[[object], object]] = {
    "float | None": _opt_float,
    "int | None": _opt_int,
    "str | None": _opt_str,
    "bool | None": lambda v: v if isinstance(v, bool) else None,
    "int": lambda v: _opt_int(v) or 0,
    "str": lambda v: "" if v is None else str(v),
    "tuple[int, ...] | None": histogram_counts,
    "tuple[RankLevel, ...]": lambda v: tuple(
        RankLevel.from_json(x) for x in (v if isinstance(v, list) else ()) if isinstance(x, dict)
    ),
    "Mapping[str, int]": lambda v: {
        str(k): n for k, raw in _object(v).items() if (n := _opt_int(raw)) is not None
    },
}
# Keys written only when set (absent, not null, otherwise): the schema has always had them so.
_OMIT_WHEN_NONE = frozenset(
    {
        "chunk_accept_mismatch",
        "accept_length_note",
        "reason",
        "window_note",
        "early_stop",
        "achieved_rate",
        "sent_rate",
        "behind",
        "prompt_len_checked",
        "prompt_len_off",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelSummary:
    """One level of one cell, summarised (DESIGN 4 definitions; durations in server seconds)."""

    level: int
    label: str | None = None
    concurrency: int | None = None
    rate: float | None = None
    """Open-loop requests per second; None for a closed-loop (concurrency) level."""
    status: str = "done"
    reason: str | None = None
    """Why a failed level failed: the server's failure when the runner saw one, else its
    requests' most common error (`connection refused`, `HTTP 401: ...`); None otherwise."""
    requests: int = 0
    """Requests that finished without an error."""
    errors: int = 0
    error_kinds: Mapping[str, int] = field(default_factory=dict)
    duration_s: float | None = None
    output_tokens: int | None = None
    output_tok_s: float | None = None
    request_s: float | None = None
    accept_length: float | None = None
    """Accepted tokens per step of a speculative cell; None when autoregressive."""
    accept_length_counters: float | None = None
    """From SGLang's counters before and after the level (generation tokens / verify calls)."""
    accept_length_per_request: float | None = None
    accept_length_gauge: float | None = None
    tokens_per_chunk: float | None = None
    verify_tokens_per_step: int | None = None
    accepted_tokens_per_step: float | None = None
    """Tokens committed per verify step, bonus included (1 when autoregressive)."""
    step_time_s: float | None = None
    effective_tok_s: float | None = None
    chunk_accept_mismatch: float | None = None
    """|tokens per chunk - acceptance| / acceptance, when both are known."""
    ttft: Stats = field(default_factory=Stats)
    itl: Stats = field(default_factory=Stats)
    e2e: Stats = field(default_factory=Stats)
    chunk_gap: Stats = field(default_factory=Stats)
    gpu_util_pct: float | None = None
    gpu_power_w: float | None = None
    pcie_rx_bytes_s: float | None = None
    pcie_tx_bytes_s: float | None = None
    gpu_samples: int | None = None
    speedup_vs_off: float | None = None
    """Output tok/s over the same profile, layout and level with speculation off."""
    accept_length_note: str | None = None
    """How `accept_length` differs from ours (levels imported from SGLang's benchmark)."""
    accept_ratio: float | None = field(default=None, init=False)
    """Accepted tokens per step / verify tokens per step: the share of the tokens the target
    verifies that it keeps (1 autoregressive; falls as a DDTree budget's extra nodes are
    verified and thrown away)."""
    correct_drafts_histogram: tuple[int, ...] | None = None
    """Index k: the level's verify steps that accepted exactly k drafts (bonus token not
    counted), summed over its requests' `spec_correct_drafts_histogram`; None when no request
    carried one (an autoregressive server, a server that does not send it)."""
    correct_drafts_requests: int | None = None
    """How many of the level's finished requests carried a histogram."""
    accept_drop_position: int | None = None
    """The first draft position (1-based) accepted in fewer than half of the verify steps:
    the smallest k >= 1 with P(accepted drafts >= k) < 0.5 (`acceptance.drop_position`)."""
    accept_length_p10: float | None = None
    """Per-request acceptance length (tokens per verify step, bonus included; SGLang's
    `spec_accept_length`) at the 10th percentile over the level's requests."""
    accept_length_p50: float | None = None
    accept_length_p90: float | None = None
    dp_ranks: tuple[RankLevel, ...] = ()
    """Per DP rank: requests, output tok/s, per-request decode speed, acceptance
    (`rank_facts.rank_levels`); empty (and not written) when no request named its rank."""
    window: str | None = None
    """`steady`: the statistics count the level's steady state (`console.bench.steady`);
    `all`: every request (see `window_note`); None in a summary from before windows."""
    window_note: str | None = None
    """Why every request was counted (open loop, too short, `--include-transients`)."""
    window_start_s: float | None = None
    """The steady window's offsets from the level's first send, in server seconds."""
    window_end_s: float | None = None
    counted_requests: int | None = None
    """Finished requests inside the window: the ones the latency statistics count."""
    slo_met: int | None = None
    """Requests of the window that finished and met every target of the run's SLO."""
    slo_counted: int | None = None
    """Requests of the window the SLO was judged on, failures included."""
    slo_attainment: float | None = None
    """slo_met / slo_counted (SGLang's `slo_attainment`); None without an SLO."""
    slo_pass: bool | None = None
    """Whether `slo_attainment` reaches the SLO's required share."""
    slo_ttft_attainment: float | None = None
    """The share that met the TTFT target alone (None when it had none)."""
    slo_itl_attainment: float | None = None
    slo_e2e_attainment: float | None = None
    goodput_tok_s: float | None = None
    """Output tok/s of the requests that met the SLO, over the same seconds as
    `output_tok_s`: equal to it when every request met the SLO."""
    goodput_req_s: float | None = None
    """Requests per second that met the SLO (SGLang's `request_goodput`)."""
    early_stop: str | None = None
    """Why a saturation search stopped this level before its planned requests."""
    achieved_rate: float | None = None
    """A rate search level's completions per server second (`LevelRecord.achieved_rate`)."""
    sent_rate: float | None = None
    behind: str | None = None
    """Why a rate search level fails on pace, `fell behind: ...`; it fails whatever its
    latencies (`slo_pass` is False)."""
    prompt_len_checked: int | None = None
    """Finished requests whose prompt went as token ids and whose server counted its
    `prompt_tokens`; None when there were none (text prompts)."""
    prompt_len_off: int | None = None
    """Of those, the ones whose `prompt_tokens` differ from the ids sent by more than
    `PROMPT_LEN_TOLERANCE`: a tokenizer or template that changes the prompt's length."""

    def __post_init__(self) -> None:
        if self.requests == 0:
            # No request finished: nothing was measured per step (a stored summary that
            # says 1 for such a level reads as unmeasured too).
            object.__setattr__(self, "accepted_tokens_per_step", None)
            object.__setattr__(self, "verify_tokens_per_step", None)
        # Derived fields: computed here from the measured ones, never read back from JSON.
        accepted, verified = self.accepted_tokens_per_step, self.verify_tokens_per_step
        ratio = accepted / verified if accepted is not None and verified else None
        object.__setattr__(self, "accept_ratio", ratio)
        if self.status == "failed" and self.reason is None and self.error_kinds:
            # A failed level always says why; a summary written without `reason` still does.
            object.__setattr__(self, "reason", most_common_error(self.error_kinds))

    def to_json(self) -> JsonDict:
        out: JsonDict = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, Stats):
                out.update(value.to_json(item.name))
            elif item.name == "error_kinds":
                out[item.name] = dict(value)
            elif item.name == "dp_ranks":
                if value:
                    out[item.name] = [rank.to_json() for rank in value]
            elif isinstance(value, tuple):
                out[item.name] = list(value)
            elif value is not None or item.name not in _OMIT_WHEN_NONE:
                out[item.name] = value
        return out

    @classmethod
    def from_json(cls, data: JsonObject) -> LevelSummary:
        if _opt_int(data.get("level")) is None:
            raise ValueError("a level summary without its level number")
        # Values checked by each field's reader: typed by annotation, so Any here.
        values: dict[str, Any] = {}
        for item in fields(cls):
            if not item.init:
                continue
            if item.type == "Stats":
                values[item.name] = Stats.from_json(data, item.name)
            else:
                values[item.name] = _READERS[str(item.type)](data.get(item.name))
        return cls(**values)

    @property
    def load_label(self) -> str:
        """`4` for concurrency 4, `2/s` for an open-loop rate of 2 per second."""
        return str(self.concurrency) if self.rate is None else f"{self.rate:g}/s"

    def facts(self) -> LevelFacts:
        return LevelFacts(
            concurrency=self.concurrency,
            accept_length=self.accept_length,
            step_time_s=self.step_time_s,
            tokens_per_chunk=self.tokens_per_chunk,
            chunk_accept_mismatch=self.chunk_accept_mismatch,
            output_tok_s=self.output_tok_s,
            rate=self.rate,
            requests=self.requests,
            dp_ranks=self.dp_ranks,
        )


def most_common_error(kinds: Mapping[str, int]) -> str | None:
    """The error seen most often (the first seen on a tie); None when there was none."""
    return max(kinds.items(), key=lambda kv: kv[1])[0] if kinds else None


# A field whose annotation has no reader would fail only when a summary.json is read back;
# fail at import instead, where the developer adding it sees it.
_UNREAD = [
    f.name
    for f in fields(LevelSummary)
    if f.init and f.type != "Stats" and str(f.type) not in _READERS
]
if _UNREAD:
    raise TypeError(f"LevelSummary fields with no JSON reader for their annotation: {_UNREAD}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Knee:
    """The highest load of a cell that met the SLO at its attainment (`console.bench.knee`)."""

    kind: str
    """`concurrency` or `rate`."""
    value: float | None
    """The highest passing load; None when even the lowest load measured failed."""
    first_failing: float | None
    """The lowest load that failed above it; None when every load measured passed."""
    attainment: float
    slo: str
    """The SLO's label, `TTFT ≤ 200 ms`."""
    loads: tuple[float, ...] = ()
    """Every load measured, in the order measured."""
    achieved: float | None = None
    """A rate knee's completions per second at the knee level (`LevelSummary.achieved_rate`);
    None for a concurrency knee, or when not measured."""

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "kind": self.kind,
            "value": self.value,
            "first_failing": self.first_failing,
            "attainment": self.attainment,
            "slo": self.slo,
            "loads": list(self.loads),
        }
        if self.achieved is not None:
            out["achieved"] = self.achieved
        return out

    @classmethod
    def from_json(cls, data: object) -> Knee | None:
        if not isinstance(data, Mapping) or data.get("kind") not in ("concurrency", "rate"):
            return None
        loads = data.get("loads")
        return cls(
            kind=str(data["kind"]),
            value=_opt_float(data.get("value")),
            first_failing=_opt_float(data.get("first_failing")),
            attainment=_opt_float(data.get("attainment")) or 0.0,
            slo=str(data.get("slo") or ""),
            loads=tuple(
                v
                for v in (_opt_float(x) for x in (loads if isinstance(loads, list) else ()))
                if v is not None
            ),
            achieved=_opt_float(data.get("achieved")),
        )

    def text(self) -> str:
        """`carries 24 concurrent at TTFT ≤ 200 ms for 95% of requests (25 failed)`."""
        share = f"{self.attainment * 100:g}%"
        unit = " concurrent" if self.kind == "concurrency" else "/s"
        if self.value is None:
            low = f"{self.first_failing:g}{unit}" if self.first_failing is not None else "-"
            return f"misses {self.slo} for {share} of requests even at {low}, the lowest load tried"
        above = (
            f", fails at {self.first_failing:g}{unit}"
            if self.first_failing is not None
            else ", the highest load tried"
        )
        done = f" (completed {self.achieved:.3g}/s)" if self.achieved is not None else ""
        return f"carries {self.value:g}{unit}{done} at {self.slo} for {share} of requests{above}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CellSummary:
    """One cell (one server: profile x layout x variant, or a given URL) and its levels."""

    cell_id: str
    profile: str | None = None
    layout: str | None = None
    variant: str | None = None
    algorithm: str | None = None
    """SGLang's speculative algorithm (`off` when none); None when the server did not say."""
    architecture: str | None = None
    ddtree_budget: int | None = None
    tree_budget: int | None = None
    """The tree-drafting budget whichever flag passed it (DDTREE's too), None for none."""
    tree_flag: str | None = None
    """The flag that passed `tree_budget` (`--speculative-ddtree-budget` for DDTREE)."""
    server: str | None = None
    """The managed server's id, or the URL of a server given on the command line."""
    status: str = "pending"
    reason: str | None = None
    levels: tuple[LevelSummary, ...] = ()
    slo: str | None = None
    """The SLO the cell's levels were judged on, `TTFT ≤ 200 ms for 95% of requests`."""
    knee: Knee | None = None
    """The highest load meeting the SLO, for a cell with an SLO and more than one load."""

    @property
    def name(self) -> str:
        """What names the cell in a table: its profile, else its server."""
        return self.profile or self.server or "-"

    @property
    def key(self) -> str:
        """Matches the same cell across runs: profile/layout/variant, else its server."""
        if self.profile:
            return f"{self.profile}/{self.layout}/{self.variant}"
        return self.server or self.cell_id

    @property
    def is_autoregressive(self) -> bool:
        return (self.algorithm or "off").upper() in ("OFF", "NONE")

    def to_json(self) -> JsonDict:
        return {
            "cell_id": self.cell_id,
            "profile": self.profile,
            "layout": self.layout,
            "variant": self.variant,
            "algorithm": self.algorithm,
            "architecture": self.architecture,
            "ddtree_budget": self.ddtree_budget,
            "tree_budget": self.tree_budget,
            "tree_flag": self.tree_flag,
            "server": self.server,
            "status": self.status,
            "reason": self.reason,
            "levels": [level.to_json() for level in self.levels],
            "slo": self.slo,
            "knee": None if self.knee is None else self.knee.to_json(),
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> CellSummary:
        levels = data.get("levels") or ()
        if not isinstance(levels, list):
            raise ValueError("a cell's levels are not a list")
        return cls(
            cell_id=str(data.get("cell_id")),
            profile=_opt_str(data.get("profile")),
            layout=_opt_str(data.get("layout")),
            variant=_opt_str(data.get("variant")),
            algorithm=_opt_str(data.get("algorithm")),
            architecture=_opt_str(data.get("architecture")),
            ddtree_budget=_opt_int(data.get("ddtree_budget")),
            tree_budget=_opt_int(data.get("tree_budget")),
            tree_flag=_opt_str(data.get("tree_flag")),
            server=_opt_str(data.get("server")),
            status=str(data.get("status") or "pending"),
            reason=_opt_str(data.get("reason")),
            levels=tuple(LevelSummary.from_json(_object(level)) for level in levels),
            slo=_opt_str(data.get("slo")),
            knee=Knee.from_json(data.get("knee")),
        )

    def facts(self) -> CellFacts:
        """What the findings read from this cell."""
        return CellFacts(
            profile=self.profile,
            layout=self.layout,
            variant=self.variant,
            algorithm=self.algorithm,
            architecture=self.architecture,
            ddtree_budget=self.ddtree_budget,
            tree_budget=self.tree_budget,
            tree_flag=self.tree_flag,
            status=self.status,
            reason=self.reason,
            # A level cut short is no result: no finding rests on it.
            levels=tuple(level.facts() for level in self.levels if level.status != "interrupted"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BestLevel:
    """The cell with the highest output tok/s at one load level."""

    concurrency: int | None
    rate: float | None
    profile: str | None
    layout: str | None
    variant: str | None
    output_tok_s: float

    def to_json(self) -> JsonDict:
        return {
            "concurrency": self.concurrency,
            "rate": self.rate,
            "profile": self.profile,
            "layout": self.layout,
            "variant": self.variant,
            "output_tok_s": self.output_tok_s,
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> BestLevel:
        tok_s = _opt_float(data.get("output_tok_s"))
        if tok_s is None:
            raise ValueError("a best-per-level entry without output tok/s")
        return cls(
            concurrency=_opt_int(data.get("concurrency")),
            rate=_opt_float(data.get("rate")),
            profile=_opt_str(data.get("profile")),
            layout=_opt_str(data.get("layout")),
            variant=_opt_str(data.get("variant")),
            output_tok_s=tok_s,
        )

    @property
    def load_label(self) -> str:
        """`4` for concurrency 4, `2/s` for an open-loop rate (capped or not)."""
        return str(self.concurrency) if self.rate is None else f"{self.rate:g}/s"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """A run's `summary.json`: every cell's level summaries, the best per level, findings."""

    SCHEMA_VERSION: ClassVar[int] = 4

    run_id: str
    run_dir: str
    name: str | None = None
    kind: str | None = None
    status: str = "unknown"
    created_wall: float | None = None
    fingerprint: JsonObject = field(default_factory=dict)
    """Host, GPUs, driver and version as `run.json` recorded them (passed through)."""
    time_scale: float = 1.0
    workload: JsonObject | None = None
    """What the run sends, as `run.json` recorded it (passed through)."""
    cells: tuple[CellSummary, ...] = ()
    best: tuple[BestLevel, ...] = ()
    findings: tuple[Finding, ...] = ()

    def to_json(self) -> JsonDict:
        return {
            "schema_version": self.SCHEMA_VERSION,
            "run_id": self.run_id,
            "run_dir": self.run_dir,
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "created_wall": self.created_wall,
            "fingerprint": dict(self.fingerprint),
            "time_scale": self.time_scale,
            "workload": None if self.workload is None else dict(self.workload),
            "cells": [cell.to_json() for cell in self.cells],
            "best": [best.to_json() for best in self.best],
            "findings": [finding.to_json() for finding in self.findings],
        }

    @classmethod
    def from_json(cls, data: object) -> RunSummary:
        """Raises ValueError for a document of another schema version or shape."""
        if not isinstance(data, Mapping):
            raise ValueError("not a JSON object")
        version = data.get("schema_version")
        if version != cls.SCHEMA_VERSION:
            raise ValueError(f"summary schema {version!r} is not {cls.SCHEMA_VERSION}")
        cells, best, found = data.get("cells"), data.get("best"), data.get("findings")
        if not (isinstance(cells, list) and isinstance(best, list) and isinstance(found, list)):
            raise ValueError("cells, best and findings must be lists")
        workload = data.get("workload")
        try:
            return cls(
                run_id=str(data["run_id"]),
                run_dir=str(data.get("run_dir") or ""),
                name=_opt_str(data.get("name")),
                kind=_opt_str(data.get("kind")),
                status=str(data.get("status") or "unknown"),
                created_wall=_opt_float(data.get("created_wall")),
                fingerprint=dict(_object(data.get("fingerprint"))),
                time_scale=_opt_float(data.get("time_scale")) or 1.0,
                workload=dict(workload) if isinstance(workload, Mapping) else None,
                cells=tuple(CellSummary.from_json(_object(c)) for c in cells),
                best=tuple(BestLevel.from_json(_object(b)) for b in best),
                findings=tuple(finding_from_json(_object(f)) for f in found),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"summary unreadable: {exc!r}") from None

    @property
    def host(self) -> str | None:
        return _opt_str(self.fingerprint.get("host"))

    @property
    def gpu_names(self) -> str | None:
        return _opt_str(self.fingerprint.get("gpu_names"))

    @property
    def driver(self) -> str | None:
        return _opt_str(self.fingerprint.get("driver"))

    def levels(self) -> list[tuple[CellSummary, LevelSummary]]:
        """Every (cell, level) in table order."""
        return [(cell, level) for cell in self.cells for level in cell.levels]
