"""What the console shows of a Prometheus it reads through (`ddconsole --prometheus URL`).

Every SGLang scrape target the PrometheusSource knows becomes a server row named by its
`instance` (the store's key for its samples), ready while Prometheus scrapes it and
unresponsive with Prometheus' own error when it cannot; a target the source mapped to a
managed server is that server's row already and gets none of its own. The sources strip
gets one line saying which Prometheus is read and how many of its targets are down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.telemetry.keys import SourceId
from console.telemetry.samples import SourceState
from console.telemetry.store import TimeSeriesStore
from console.tui.views import FeedNote, ServerView

if TYPE_CHECKING:
    from console.telemetry.prom_source import PrometheusSource

PROMETHEUS = SourceId("console", "prometheus")
"""The poller's key of the Prometheus source (console.telemetry.prom_source.SOURCE_NAME,
repeated here so the first frame does not wait for its HTTP imports)."""

VIA_PROMETHEUS = "prometheus"
"""`ServerView.via` of a server read through Prometheus (the console never acts on it)."""


def _port(instance: str) -> int | None:
    _, sep, port = instance.rpartition(":")
    return int(port) if sep and port.isdigit() else None


def prometheus_views(source: PrometheusSource, store: TimeSeriesStore) -> list[ServerView]:
    """One view per SGLang instance Prometheus scrapes (or scraped within the hour)."""
    jobs = {t.instance: t.job for t in source.targets}
    views = []
    for instance in source.instances:
        if instance in source.mapped:
            continue  # listed as the managed server it is
        status = store.status(SourceId.server(instance))
        scraped = status is not None and status.state in (SourceState.OK, SourceState.DEGRADED)
        views.append(
            ServerView(
                id=instance,
                profile=VIA_PROMETHEUS,
                layout=jobs.get(instance, "-"),
                variant="-",
                state="ready" if scraped else "unresponsive",
                port=_port(instance),
                gpus=(),
                reason=None if status is None or status.state is SourceState.OK else status.reason,
                url=f"http://{instance}",
                via=VIA_PROMETHEUS,
            )
        )
    return views


def feed_note(source: PrometheusSource) -> FeedNote:
    """`prometheus http://prom:9090: 3 targets, 1 down (job/instance: error)`, or why it
    cannot be asked."""
    if source.problem is not None:
        return FeedNote(f"prometheus {source.url}: {source.problem}", ok=False)
    down = [t for t in source.targets if t.health == "down"]
    text = f"prometheus {source.url}: {len(source.targets)} targets"
    if down:
        first = down[0]
        text += f", {len(down)} down ({first.job}/{first.instance}: {first.last_error or '?'})"
    return FeedNote(text, ok=not down)
