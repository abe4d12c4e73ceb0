"""The demo sweep (`D` on Bench) on the simulator runs fewer, shorter requests than the
shipped campaign file asks of a real host, so the demo finishes in about a minute (issue 18);
the file itself is unchanged."""

from __future__ import annotations

from console.bench.shipped import DEMO_CAMPAIGN, campaign_files
from console.bench.spec import load_campaign
from console.cli.services import Services
from console.tui.live import DEMO_SWEEP_OUTPUT_LEN, DEMO_SWEEP_REQUESTS


def test_the_demo_sweep_is_shortened_on_the_simulator(free_port_profiles: dict[str, int]) -> None:
    (path,) = [p for p in campaign_files() if p.name == DEMO_CAMPAIGN]
    shipped = load_campaign(path)
    request = Services.create(demo=True).live_backend(recordings=None).demo_campaign()
    assert (request.spec.requests, request.spec.output_len) == (
        DEMO_SWEEP_REQUESTS,
        DEMO_SWEEP_OUTPUT_LEN,
    )
    assert (shipped.requests, shipped.output_len) != (
        request.spec.requests,
        request.spec.output_len,
    )
    # Everything else is the file's: the same cells, load and prompts.
    assert request.spec.variants == shipped.variants
    assert request.spec.concurrency == shipped.concurrency
    assert request.spec.input_len == shipped.input_len
