"""The demo's benchmark load, one set for `ddconsole bench --demo` and the TUI's `g` on a
demo server, so both measure the same thing and take about a minute.

Against the demo's slowest server (Qwen3.6-27B TP1 `off`, 37.45 ms a step in the
simulator's catalog) 8 requests of 256 in, 112 out take about 40 s at concurrency 1 (the
CLI's default, as for every `bench`) and about 75 s at 1,4 (the TUI's: two levels, so the
Bench screen shows a sweep). 128 out would take about 90 s in the TUI, 96 about 35 s on
the CLI; 112 keeps both near a minute.
"""

from __future__ import annotations

DEMO_REQUESTS = 8
"""Requests per level."""
DEMO_INPUT_LEN = 256
"""Prompt tokens per request."""
DEMO_OUTPUT_LEN = 112
"""Output tokens per request."""
DEMO_TUI_CONCURRENCY = (1, 4)
"""The TUI's levels on a demo server (the CLI keeps its own default, 1)."""
