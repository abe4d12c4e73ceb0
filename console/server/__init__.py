"""Server lifecycle: launch plans detached, follow them to ready, stop them, reattach."""
