"""`python -m console` runs the ddconsole command line."""

from console.cli import main

raise SystemExit(main())
