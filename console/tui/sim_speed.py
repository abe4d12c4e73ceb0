"""The demo simulator's own speed for a cell, so a confirmation can say how long a demo
benchmark will take: the plan's argv read by the simulator's parser, its catalog and
performance model, divided by the speed factor the demo servers run at."""

from __future__ import annotations

import os

from console.bench.estimate import Cell, CellSpeed
from console.core.errors import ConsoleError
from console.profiles.command import build_command
from console.profiles.loader import ProfileCatalog

SIM_ARGV_START = 3
"""A demo plan's argv is `python -m console.sim FLAGS...`."""


def sim_cell_speed(catalog: ProfileCatalog, cell: Cell) -> CellSpeed | None:
    """The simulated server's speed for (profile, layout, variant); None when the cell does
    not resolve or the simulator runs without delay."""
    from console.sim import options as sim_options
    from console.sim.catalog import lookup
    from console.sim.perf import decoding, prefill_time

    profile, layout, variant = cell
    try:
        command = build_command(catalog.get(profile), layout, variant, demo=True)
        options = sim_options.parse(list(command.argv[SIM_ARGV_START:]), dict(os.environ))
    except (ConsoleError, KeyError, sim_options.OptionsError):
        return None
    if options.speed <= 0:
        return None
    model_path = str(options.get("model_path") or "")
    model = lookup(options.get("served_model_name"), model_path)
    tp = int(options.get("tp_size") or 1)
    decode = decoding(
        model,
        tp=tp,
        crosses_numa=len(command.layout.gpus) > 4 and tp > 4,
        algorithm=options.get("speculative_algorithm"),
        num_draft_tokens=options.get("speculative_num_draft_tokens"),
        num_steps=options.get("speculative_num_steps"),
        ddtree_budget=options.get("speculative_ddtree_budget"),
    )
    load_s = 0.4 + 0.05 * tp + 1.5 + model.size_gb / (tp * 12.0) + 0.5
    prefill_per_token = prefill_time(model, tp, 1_000_000) / 1_000_000
    return CellSpeed(
        step_s=decode.step_s / options.speed,
        batch_alpha=decode.batch_alpha,
        tokens_per_step=decode.accept_mean,
        prefill_tok_s=options.speed / prefill_per_token,
        ready_s=load_s / options.speed,
    )
