"""What a user asks to run: a benchmark of one server, or a campaign of cells.

Both front ends build these typed requests (the CLI from its flags, the TUI from its forms)
and hand them to `console.bench.launch`, which stores the request in the run's `run.json`;
the runner, in this process or detached, reads it back from there. No argv or TOML is
rebuilt on the way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from console.bench.spec import CampaignSpec, CellSpec, load_campaign
from console.bench.workload import DEFAULT_VOCAB, Workload, load_dataset
from console.bench.workload_files import named_trace, replay_level
from console.bench.workload_files import resolve as resolve_workload
from console.core.errors import ConsoleError, UsageError
from console.profiles.command import select
from console.profiles.loader import ProfileCatalog
from console.profiles.slo import DEFAULT_ATTAINMENT, Slo, check_attainment, parse_slo

if TYPE_CHECKING:
    # The level runner pulls in httpx: the TUI builds requests before its first frame.
    from console.bench.levels import LevelSpec

EndpointName = Literal["generate", "chat", "completions"]
FindMaxKind = Literal["concurrency", "rate"]
DEFAULT_REQUESTS = 16
"""Requests per level when neither a count nor a duration is given."""


def cell_id(profile: str, layout: str, variant: str) -> str:
    """A cell's id in a run: `profile/layout/variant`."""
    return f"{profile}/{layout}/{variant}"


def level_specs(
    *,
    concurrency: tuple[int, ...],
    rates: tuple[float, ...],
    requests: int | None,
    duration_s: float | None,
    warmup: int,
    flush_cache: bool,
) -> list[LevelSpec]:
    """One level per concurrency, or per rate (open loop; the first concurrency caps the
    requests in flight)."""
    from console.bench.levels import LevelSpec

    if requests is None and duration_s is None:
        requests = DEFAULT_REQUESTS
    if requests is not None and requests < 1:
        raise UsageError("--requests must be at least 1")
    if duration_s is not None and duration_s <= 0:
        raise UsageError("--duration must be positive")
    if rates:
        cap = concurrency[0] if concurrency else None
        return [
            LevelSpec(i, cap, rate, requests, duration_s, warmup, flush_cache)
            for i, rate in enumerate(rates)
        ]
    return [
        LevelSpec(i, c, None, requests, duration_s, warmup, flush_cache)
        for i, c in enumerate(concurrency or (1,))
    ]


def check_analysis(
    slo: str | None, attainment: float, find_max_limit: float | None, where: str
) -> None:
    """UsageError when the SLO does not parse or the attainment is not a share."""
    check_attainment(attainment, "--attainment" if where == "--slo" else "attainment")
    if slo is not None:
        parse_slo(slo, where, attainment)
    if find_max_limit is not None and find_max_limit <= 0:
        raise UsageError("the search limit must be a positive load")


def require_slo(find_max: str | None, slo: str | None) -> None:
    """A saturation search needs targets to search against (checked once the profile's
    default SLO is known)."""
    if find_max is not None and slo is None:
        raise UsageError(
            f"--find-max {find_max} needs latency targets: give --slo ttft=200ms (or `slo` in"
            " the campaign file, or `slo` in the profile's [bench] table)"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchRequest:
    """A benchmark of one running server: `ddconsole bench`'s flags, or the Bench screen."""

    server_id: str | None = None
    """A managed server (see `ddconsole ps`); or give `url`."""
    url: str | None = None
    """Any SGLang server, managed or not."""
    concurrency: tuple[int, ...] = ()
    """Closed-loop concurrency per level (empty: one level at 1)."""
    rates: tuple[float, ...] = ()
    """Open-loop Poisson request rates per second instead (one level each)."""
    requests: int | None = None
    """Requests per level (16 unless `duration_s`)."""
    duration_s: float | None = None
    """Seconds per level instead of a request count."""
    input_len: int = 512
    output_len: int = 256
    range_ratio: float = 1.0
    endpoint: EndpointName = "generate"
    warmup: int = 1
    flush_cache: bool = False
    seed: int = 0
    dataset: str | None = None
    """Prompts from this JSONL or ShareGPT JSON file instead of random token ids."""
    workload_name: str | None = None
    """Another workload (`--workload`/`--trace`): a built-in kind (chat, shared-prefix,
    multi-turn), a shipped or user workload file by name, or a dataset or trace file's path
    (console.bench.workload_files)."""
    replay_speed: float = 1.0
    """A trace replay's speed-up over the trace's own clock."""
    vocab_size: int = DEFAULT_VOCAB
    name: str | None = None
    """The run's name (default: `bench-` and the cell: profile-layout-variant, or the URL)."""
    slo: str | None = None
    """Latency targets, `ttft=200ms,itl=40ms` (`--slo`, else the server's profile's)."""
    attainment: float = DEFAULT_ATTAINMENT
    """The share of a level's requests that must meet the SLO for the level to pass."""
    include_transients: bool = False
    """Count every request, ramp-up and drain included (default: the steady window)."""
    find_max: FindMaxKind | None = None
    """Search for the highest concurrency (or rate) meeting the SLO instead of fixed levels."""
    find_max_limit: float | None = None
    """The highest load the search tries (None: the search's own limit)."""

    kind: Literal["bench"] = "bench"

    def validate(self) -> BenchRequest:
        """Self, or UsageError naming the first bad field."""
        if (self.server_id is None) == (self.url is None):
            raise UsageError("name one target: a managed server (--server) or a URL (--url)")
        if any(c < 1 for c in self.concurrency):
            raise UsageError("concurrency levels must be at least 1")
        if any(r <= 0 for r in self.rates):
            raise UsageError("rates must be positive (requests per second)")
        if self.warmup < 0:
            raise UsageError("--warmup cannot be negative")
        if self.workload_name is not None and self.dataset is not None:
            raise UsageError("give --workload (or --trace) or --dataset, not both")
        if self.find_max is not None and named_trace(self.workload_name) is not None:
            raise UsageError(
                "--find-max does not apply to a trace: its arrivals are the trace's "
                "(try --replay-speed)"
            )
        self.levels()
        self.workload_spec().validate()
        check_analysis(self.slo, self.attainment, self.find_max_limit, "--slo")
        return self

    def slo_target(self) -> Slo | None:
        """The SLO the run's levels are judged on; None without one."""
        return parse_slo(self.slo, "--slo", self.attainment) if self.slo else None

    def levels(self) -> list[LevelSpec]:
        trace = named_trace(self.workload_name)
        if trace is not None:
            # A trace sets its own arrivals: one level, the whole trace unless --requests or
            # --duration cut it.
            return [
                replay_level(
                    trace,
                    speed=self.replay_speed,
                    requests=self.requests,
                    duration_s=self.duration_s,
                    warmup=self.warmup,
                    flush_cache=self.flush_cache,
                )
            ]
        return level_specs(
            concurrency=self.concurrency,
            rates=self.rates,
            requests=self.requests,
            duration_s=self.duration_s,
            warmup=self.warmup,
            flush_cache=self.flush_cache,
        )

    def workload_spec(self) -> Workload:
        """The workload without its prompts file read (cheap; for validation)."""
        return Workload(
            self.input_len,
            self.output_len,
            self.range_ratio,
            self.vocab_size,
            self.seed,
            Path(self.dataset) if self.dataset else None,
        )

    def workload(self) -> Workload:
        """The workload with the dataset's prompts loaded (the runner calls this)."""
        spec = self.workload_spec().validate()
        if self.workload_name is not None:
            return resolve_workload(self.workload_name, spec)
        if spec.dataset is None:
            return spec
        prompts = tuple(load_dataset(spec.dataset, self.output_len))
        return Workload(
            spec.input_len,
            spec.output_len,
            spec.range_ratio,
            spec.vocab_size,
            spec.seed,
            spec.dataset,
            prompts,
        )

    def run_name(self, cell_id: str) -> str:
        return self.name or f"bench-{cell_id.replace('/', '-')}"

    def workload_json(self) -> dict[str, Any]:  # JSON written to run.json
        """The run's `workload` record, as summaries and listings read it."""
        return {
            "input_len": self.input_len,
            "output_len": self.output_len,
            "range_ratio": self.range_ratio,
            "endpoint": self.endpoint,
            "seed": self.seed,
            "dataset": self.dataset,
            "workload": self.workload_name,
            "replay_speed": self.replay_speed,
            "vocab_size": self.vocab_size,
            "warmup": self.warmup,
            "flush_cache": self.flush_cache,
        }

    def to_json(self) -> dict[str, Any]:  # JSON at the edge: run.json
        data = asdict(self)
        data["concurrency"] = list(self.concurrency)
        data["rates"] = list(self.rates)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchRequest:  # JSON read from run.json
        """The request `to_json` wrote; ConsoleError when it is not one."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConsoleError(f"benchmark request: unknown fields {', '.join(unknown)}")
        values = dict(data)
        try:
            values["concurrency"] = tuple(int(c) for c in values.get("concurrency", ()))
            values["rates"] = tuple(float(r) for r in values.get("rates", ()))
            return cls(**values).validate()
        except (TypeError, ValueError) as exc:
            raise ConsoleError(f"benchmark request: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class CampaignRequest:
    """A campaign: its parsed spec (a file's, or cells chosen in the TUI), with any
    overrides (GPUs, port) already applied and validated."""

    spec: CampaignSpec
    source: str | None = None
    """The campaign file it came from (None for cells chosen in the TUI)."""
    profile_slos: dict[str, str] = field(default_factory=dict)
    """Each cell profile's default SLO (its [bench] slo), read when the campaign was
    checked, for cells of a campaign that sets none."""

    kind: Literal["campaign"] = "campaign"

    @classmethod
    def from_file(
        cls, path: Path, *, gpus: tuple[int, ...] | None = None, port: int | None = None
    ) -> CampaignRequest:
        """A campaign file, optionally placed on other GPUs or another port."""
        spec = load_campaign(path)
        return cls(spec=spec, source=str(path.resolve())).placed(gpus=gpus, port=port)

    @classmethod
    def from_cells(
        cls,
        cells: tuple[tuple[str, str, str], ...],
        *,
        concurrency: tuple[int, ...],
        requests: int,
        name: str = "chosen-cells",
    ) -> CampaignRequest:
        """Cells (profile, layout, variant) picked one by one, each run at these levels."""
        try:
            spec = CampaignSpec(
                name=name,
                cells=[CellSpec(profile=p, layout=lay, variant=v) for p, lay, v in cells],
                concurrency=list(concurrency),
                requests=requests,
            )
        except ValidationError as exc:
            raise UsageError(f"chosen cells: {exc.errors(include_url=False)[0]['msg']}") from None
        return cls(spec=spec)

    def placed(
        self, *, gpus: tuple[int, ...] | None = None, port: int | None = None
    ) -> CampaignRequest:
        """The same campaign with its servers on `gpus` and `port` (None keeps each)."""
        changes: dict[str, object] = {}  # field name -> value, validated by the spec
        if gpus is not None:
            changes["gpus"] = list(gpus)
        if port is not None:
            changes["port"] = port
        if not changes:
            return self
        return replace(self, spec=self.spec.with_changes(**changes))

    def check(self, catalog: ProfileCatalog) -> CampaignRequest:
        """Self, or a ConsoleError naming the first cell whose profile, layout or variant
        does not exist (before any run folder is made)."""
        slos: dict[str, str] = {}
        for cell in self.spec.cell_list():
            entry = catalog.get(cell.profile)
            select(entry, cell.layout, cell.variant)
            if entry.profile.bench.slo is not None:
                slos[cell.profile] = entry.profile.bench.slo
        checked = replace(self, profile_slos=slos)
        for cell in self.spec.cell_list():
            require_slo(self.spec.find_max, checked.slo_spec(cell.profile))
        return checked

    def slo_spec(self, profile: str | None) -> str | None:
        """The SLO text a cell of `profile` is judged on: the campaign's, else its profile's."""
        if self.spec.slo is not None:
            return self.spec.slo
        return self.profile_slos.get(profile or "")

    def slo_target(self, profile: str | None) -> Slo | None:
        text = self.slo_spec(profile)
        return parse_slo(text, "slo", self.spec.attainment) if text else None

    def levels(self) -> list[LevelSpec]:
        spec = self.spec
        trace = named_trace(spec.workload, "workload")
        if trace is not None:
            # The whole trace, unless `duration_s` cuts it (`requests` is for other kinds).
            return [
                replay_level(
                    trace,
                    speed=spec.replay_speed,
                    requests=None,
                    duration_s=spec.duration_s,
                    warmup=spec.warmup,
                    flush_cache=spec.flush_cache,
                )
            ]
        return level_specs(
            concurrency=tuple(spec.concurrency),
            rates=tuple(spec.rates),
            requests=spec.requests,
            duration_s=spec.duration_s,
            warmup=spec.warmup,
            flush_cache=spec.flush_cache,
        )

    def workload(self) -> Workload:
        spec = self.spec
        dataset = Path(spec.dataset) if spec.dataset else None
        workload = Workload(
            spec.input_len,
            spec.output_len,
            spec.range_ratio,
            seed=spec.seed,
            dataset=dataset,
            prompts_from_file=tuple(load_dataset(dataset, spec.output_len)) if dataset else (),
        ).validate()
        if spec.workload is not None:
            return resolve_workload(spec.workload, workload, "workload")
        return workload

    def workload_json(self) -> dict[str, Any]:  # JSON written to run.json
        spec = self.spec
        return {
            "input_len": spec.input_len,
            "output_len": spec.output_len,
            "range_ratio": spec.range_ratio,
            "endpoint": spec.endpoint,
            "seed": spec.seed,
            "requests": spec.requests,
            "duration_s": spec.duration_s,
            "workload": spec.workload,
            "replay_speed": spec.replay_speed,
        }

    def to_json(self) -> dict[str, Any]:  # JSON at the edge: run.json
        return {
            "kind": self.kind,
            "spec": self.spec.model_dump(mode="json"),
            "source": self.source,
            "profile_slos": dict(self.profile_slos),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CampaignRequest:  # JSON from run.json
        """The request `to_json` wrote; ConsoleError when it is not one."""
        if "spec" not in data:
            raise ConsoleError("run.json: the campaign request has no spec")
        spec = CampaignSpec.from_stored(data["spec"], "run.json spec")
        source = data.get("source")
        slos = data.get("profile_slos")
        return cls(
            spec=spec,
            source=source if isinstance(source, str) else None,
            profile_slos={
                str(k): v
                for k, v in (slos if isinstance(slos, dict) else {}).items()
                if isinstance(v, str)
            },
        )


RunRequest = BenchRequest | CampaignRequest


def request_from_json(data: object) -> RunRequest:
    """A stored request, by its `kind`."""
    if not isinstance(data, dict):
        raise ConsoleError("run request: not a JSON object")
    kind = data.get("kind")
    if kind == "bench":
        return BenchRequest.from_json(data)
    if kind == "campaign":
        return CampaignRequest.from_json(data)
    raise ConsoleError(f"run request: unknown kind {kind!r}")
