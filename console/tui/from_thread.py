"""Hand a worker thread's result to the UI only while the screen that asked is still shown.

A thread worker can finish after its screen was popped or while the app shuts down; the
widgets it would fill are gone then, and `App.call_from_thread` would run the callback
anyway and fail the worker (and so the app) on a missing widget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.dom import DOMNode


def is_live(node: DOMNode) -> bool:
    """True while the node is in the app's DOM, not being removed, and the app is running."""
    # Textual keeps no public flag for "being removed" or "shutting down": `_pruning` is set
    # on every node a removal takes, `_running` is cleared first thing in App._shutdown.
    try:
        app = node.app
    except Exception:  # no active app any more
        return False
    return (
        bool(getattr(app, "_running", False))
        and node.is_attached
        and not getattr(node, "_pruning", False)
        and not getattr(node, "_closing", False)
    )


def call_live(node: DOMNode, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """From a worker thread: run `callback(*args, **kwargs)` on the UI loop and wait for it,
    or do nothing when `node` has left the screen or the app is ending."""

    def guarded() -> None:
        if is_live(node):
            callback(*args, **kwargs)

    if not is_live(node):
        return
    try:
        node.app.call_from_thread(guarded)
    except RuntimeError:
        # The app stopped between the check and the call (its loop is closed or gone); a
        # RuntimeError from the callback itself still reaches the worker.
        if is_live(node):
            raise
