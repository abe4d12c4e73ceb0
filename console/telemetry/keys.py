"""Who a reading is from: one typed source id, and the series keys derived from it.

A `SourceId` names a telemetry source (the GPU source as a whole, one GPU, the host, an SGLang
server, the console itself). Its text form ("gpu:0", "server:srv-1", "host") is what the
store, `metrics --json` and recordings show, and `parse` reads it back; series keys
("gpu.0.util_pct") come from `series`, so no module builds either by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal
from urllib.parse import urlparse

SourceKind = Literal["gpu", "host", "server", "console"]


@dataclass(frozen=True, slots=True, order=True)
class SourceId:
    """`kind` plus the member's name within it; an empty name is the kind's source as a
    whole (the GPU source that reads every GPU, the host, the console)."""

    kind: SourceKind
    name: str = ""

    GPUS: ClassVar[SourceId]
    HOST: ClassVar[SourceId]
    CONSOLE: ClassVar[SourceId]

    @classmethod
    def gpu(cls, index: int) -> SourceId:
        return cls("gpu", str(index))

    @classmethod
    def server(cls, server_id: str) -> SourceId:
        return cls("server", server_id)

    @classmethod
    def url(cls, url: str) -> SourceId:
        """An SGLang server watched by URL alone: named by its host and port."""
        parsed = urlparse(url)
        return cls("server", f"{parsed.hostname or 'host'}:{parsed.port or 80}")

    @classmethod
    def parse(cls, text: str) -> SourceId:
        """The id `str()` wrote; ValueError for anything else."""
        kind, sep, name = text.partition(":")
        if not sep and kind == "gpu":
            return cls.GPUS
        if not sep and kind == "host":
            return cls.HOST
        if not sep and kind == "console":
            return cls.CONSOLE
        if sep and kind == "gpu" and name.isdigit():
            return cls("gpu", name)
        if sep and kind == "server" and name:
            return cls("server", name)
        raise ValueError(f"not a telemetry source id: {text!r}")

    @property
    def index(self) -> int | None:
        """The GPU index of a single-GPU id, else None."""
        return int(self.name) if self.kind == "gpu" and self.name else None

    def series(self, field: str) -> str:
        """The store's key for one numeric field of this source's samples."""
        return f"{self.kind}.{self.name}.{field}" if self.name else f"{self.kind}.{field}"

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" if self.name else self.kind


SourceId.GPUS = SourceId("gpu")
SourceId.HOST = SourceId("host")
SourceId.CONSOLE = SourceId("console")
