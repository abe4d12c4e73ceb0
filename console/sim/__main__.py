"""`python -m console.sim`: the SGLang-compatible simulator (demo mode and tests)."""

from console.sim.server import main

raise SystemExit(main())
