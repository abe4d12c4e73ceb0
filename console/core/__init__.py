"""Pure building blocks shared by every layer: errors, paths, units, clocks, files."""
