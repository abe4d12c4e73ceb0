"""Campaign files: which cells (profile x layout x variant) and which levels to run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from console.bench.workload_files import named_trace
from console.core.errors import ProfileError, UsageError
from console.profiles.loader import describe_error, format_key_path, read_toml_file
from console.profiles.slo import DEFAULT_ATTAINMENT, checked_slo_text


class CellSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    profile: str
    layout: str
    variant: str


DAY_S = 86400.0
RATE_MAX = 1e6
"""Requests per second: far beyond any server (the CLI's `--rate` bound too)."""
# The bounds of the CLI's flags (console/cli/argtypes.py), so a campaign file, `--resume` of
# its stored spec and the TUI refuse what `bench` refuses, each with one line naming the key.
DURATION_MAX_S = 30 * DAY_S
REQUESTS_MAX = 10**12
TOKENS_MAX = 2_000_000
WARMUP_MAX = 100_000

Rate = Annotated[float, Field(gt=0, le=RATE_MAX)]


class CampaignSpec(BaseModel):
    """A campaign file. Cells are `profile` x `layouts` x `variants`, or an explicit list.
    Every number is finite (`nan` and `inf`, which TOML allows, are refused) and bounded."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    name: str = Field(min_length=1)
    description: str = ""
    profile: str | None = None
    layouts: list[str] = Field(default_factory=list)
    variants: list[str] = Field(default_factory=list)
    cells: list[CellSpec] = Field(default_factory=list)
    concurrency: list[int] = Field(default_factory=lambda: [1])
    rates: list[Rate] = Field(default_factory=list)
    requests: int | None = Field(default=16, ge=1, le=REQUESTS_MAX)
    duration_s: float | None = Field(default=None, gt=0, le=DURATION_MAX_S)
    input_len: int = Field(default=512, ge=1, le=TOKENS_MAX)
    output_len: int = Field(default=256, ge=1, le=TOKENS_MAX)
    range_ratio: float = Field(default=1.0, gt=0, le=1)
    endpoint: Literal["generate", "chat", "completions"] = "generate"
    warmup: int = Field(default=1, ge=0, le=WARMUP_MAX)
    flush_cache: bool = True
    seed: int = 0
    dataset: str | None = None
    workload: str | None = None
    """A workload by name or file (console.bench.workload_files); a trace replays whole."""
    replay_speed: float = Field(default=1.0, gt=0, le=RATE_MAX)
    port: int | None = Field(default=None, ge=1, le=65535)
    gpus: list[int] | None = None
    slo: str | None = None
    """Latency targets every cell is judged on, `ttft=200ms,itl=40ms` (else each cell's
    profile's [bench] slo)."""
    attainment: float = Field(default=DEFAULT_ATTAINMENT, gt=0, le=1)
    include_transients: bool = False
    find_max: Literal["concurrency", "rate"] | None = None
    """Per cell, search for the highest load meeting the SLO instead of the fixed levels."""
    find_max_limit: float | None = Field(default=None, gt=0, le=RATE_MAX)

    @model_validator(mode="after")
    def _cells_given(self) -> CampaignSpec:
        if not self.cells and not (self.profile and self.layouts and self.variants):
            raise ValueError("give `profile`, `layouts` and `variants`, or a `cells` list")
        if any(c < 1 for c in self.concurrency):
            raise ValueError("concurrency levels must be at least 1")
        if self.requests is None and self.duration_s is None:
            raise ValueError("give `requests` or `duration_s` per level")
        if self.find_max is not None and named_trace(self.workload, "workload") is not None:
            raise ValueError("`find_max` does not apply to a trace `workload` (its arrivals)")
        return self

    @field_validator("slo", mode="before")
    @classmethod
    def _slo_table(cls, value: object) -> object:
        """`slo = {ttft = "200ms", itl = "40ms"}` reads as `slo = "ttft=200ms,itl=40ms"`."""
        if isinstance(value, dict):
            return ",".join(f"{key}={target}" for key, target in value.items())
        return value

    @field_validator("slo")
    @classmethod
    def _slo_parses(cls, value: str | None) -> str | None:
        return checked_slo_text(value)

    @classmethod
    def from_stored(cls, data: object, what: str = "campaign spec") -> CampaignSpec:
        """A spec as `model_dump(mode="json")` stored it (run.json); a UsageError of one
        line naming `what` and the key when it is not a valid one."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            loc = tuple(error["loc"])
            raise UsageError(f"{what}: {format_key_path(loc)}: {_reason(error, loc)}") from None

    def with_changes(self, **changes: object) -> CampaignSpec:
        """A copy with `changes` applied and validated again (UsageError when invalid)."""
        try:
            return CampaignSpec.model_validate({**self.model_dump(), **changes})
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            loc = tuple(error["loc"])
            raise UsageError(f"{format_key_path(loc)}: {_reason(error, loc)}") from None

    def cell_list(self) -> list[CellSpec]:
        if self.cells:
            return list(self.cells)
        assert self.profile is not None
        return [
            CellSpec(profile=self.profile, layout=layout, variant=variant)
            for layout in self.layouts
            for variant in self.variants
        ]


def load_campaign(path: Path) -> CampaignSpec:
    # Binary, FIFO, deeply nested or malformed: one ProfileError naming the file.
    raw = read_toml_file(path)
    try:
        return CampaignSpec.model_validate(raw)
    except RecursionError:
        raise ProfileError(str(path), "", "values nested too deeply to check") from None
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = tuple(error["loc"])
        reason = _reason(error, loc)
        if error["type"] == "extra_forbidden":
            valid = ", ".join(sorted(CampaignSpec.model_fields))
            reason = f"unknown key {loc[-1]!r} (valid keys: {valid})"
        raise ProfileError(str(path), format_key_path(loc), reason) from None


def _reason(error: Any, loc: tuple[int | str, ...]) -> str:
    if error["type"] == "finite_number":
        return f"{error.get('input')!r} is not a finite number"
    return describe_error(error, loc)
