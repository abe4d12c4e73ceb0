"""`logs -f` shows the tail and then every new line exactly once: the follower starts where
the tail's whole lines end (before, a line written in between was lost, and on a log over
1 MiB the follower's first read did not reach the end and repeated old lines)."""

from __future__ import annotations

from pathlib import Path

from console.server.milestones import LogFollower, tail_and_end, tail_lines


def test_the_follower_starts_where_the_tail_ends_on_a_big_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    old = [f"old line {i:06d} " + "x" * 40 for i in range(40_000)]  # about 2.2 MB
    log.write_text("\n".join(old) + "\n" + "partial, still being writ")
    tail, end = tail_and_end(str(log), 3)
    assert tail == old[-3:]
    # The line still being written is left to the follower, which gets it once whole.
    follower = LogFollower(str(log), offset=end)
    assert follower.read_new_lines() == []
    with log.open("a") as handle:
        handle.write("ten\nnew one\n")
    assert follower.read_new_lines() == ["partial, still being written", "new one"]
    assert follower.read_new_lines() == []


def test_the_plain_tail_keeps_a_last_line_being_written(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a\nb\nc")
    assert tail_lines(str(log), 2) == ["b", "c"]
    assert tail_and_end(str(log), 2) == (["a", "b"], 4)
    assert tail_and_end(str(tmp_path / "missing.log"), 2) == ([], 0)
