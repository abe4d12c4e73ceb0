"""A replay opens before its file is indexed: `read_recording(background=True)` returns once
the first frames are readable and indexes the rest on a thread. What a reader sees meanwhile
is a consistent prefix; once indexing ends the index is the one a synchronous read builds; a
start position not indexed yet is followed and then reached; damage found late is reported;
closing mid-way stops the thread and leaves nothing behind.

The indexing thread is held at a gate (a wrapper around the line reader) so that each test
sees it mid-way whatever the machine's speed."""

from __future__ import annotations

import os
import threading
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from console.telemetry import recording as recording_module
from console.telemetry.recording import SUFFIX, Recording, read_recording
from console.tui.app import ConsoleApp
from console.tui.replay import ReplayBackend
from console.tui.widgets.topbar import TopBar
from tests.tui.conftest import until
from tests.unit.test_recording_index import HISTORY_S, state, write

HELD_AT_LINE = 400
"""The line the indexing thread waits at: well past the first published frames."""


def index_of(recording: Recording) -> tuple[object, ...]:
    frames = recording.frames
    return (
        list(frames._offsets),
        list(frames._times),
        list(frames._reach),
        bytes(frames._kinds),
        frames._kind_names,
        {kind: list(where) for kind, where in frames._by_kind.items()},
        {group: list(where) for group, where in frames._poll_groups.items()},
        recording.damage,
    )


def fraction_of(replay: ReplayBackend) -> float | None:
    return replay.indexed_fraction  # read through a call: it changes behind mypy's back


def damage_of(recording: Recording) -> str | None:
    return recording.damage


def message_of(replay: ReplayBackend) -> str | None:
    return replay.message


class Gate:
    """Where the indexing thread is held: `reached` once it waits, `release` lets it on."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    def held(self) -> None:
        """Wait until the thread waits at the gate: what it published stays put."""
        assert self.reached.wait(60), "the indexing thread never reached the gate"


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    """Hold background indexing (not a synchronous read) at line HELD_AT_LINE until
    released; frames are published every 4 KiB of lines instead of every MiB."""
    held = Gate()
    real = recording_module._lines

    def gated(path: Path, progress: list[int]) -> Generator[tuple[bytes, str | None], None, None]:
        for number, item in enumerate(real(path, progress)):
            background = threading.current_thread() is not threading.main_thread()
            if number == HELD_AT_LINE and background:
                held.reached.set()
                assert held.release.wait(60), "the test never released the indexing thread"
            yield item

    monkeypatch.setattr(recording_module, "_lines", gated)
    monkeypatch.setattr(recording_module, "SPOOL_WRITE", 4096)
    yield held
    held.release.set()  # never leave a thread waiting


def test_a_replay_opens_mid_index_follows_its_start_and_ends_as_a_full_read(
    tmp_path: Path, gate: Gate
) -> None:
    path = tmp_path / f"big{SUFFIX}"
    write(path, 600)
    whole = read_recording(path)
    assert not whole.indexing
    assert whole.indexed_fraction == 1.0
    runs = tmp_path / "runs"
    target = 450.0
    want = ReplayBackend(
        whole, runs_root=runs, position_s=target, playing=False, history_s=HISTORY_S
    )

    opened = read_recording(path, background=True)
    gate.held()
    assert opened.indexing
    shown = len(opened.frames)
    assert 0 < shown < HELD_AT_LINE
    assert opened.duration_s < target < whole.duration_s
    assert 0.0 < opened.indexed_fraction < 1.0
    # What is readable is exactly the start of the whole file.
    assert [opened.frames.t_at(i) for i in range(shown)] == [
        whole.frames.t_at(i) for i in range(shown)
    ]
    assert all(i < shown for i in opened.frames.indices("poll"))
    assert opened.frames.applied_at(target) == shown

    replay = ReplayBackend(
        opened, runs_root=runs, position_s=target, playing=False, history_s=HISTORY_S
    )
    assert replay.indexed_fraction is not None
    assert replay.position_s == opened.duration_s  # as far as the index goes, for now
    assert replay.message is None

    gate.release.set()
    assert opened.wait_indexed(60)
    assert index_of(opened) == index_of(whole)
    replay._follow_index()  # what the app's playback tick does
    assert fraction_of(replay) is None
    assert replay.position_s == target
    assert replay.message is None
    got, expected = state(replay), state(want)
    assert got["series"].keys() == expected["series"].keys()
    for name in ("latest", "statuses", "servers", "raw_servers", "runs", "summaries"):
        assert got[name] == expected[name], name


def test_a_start_past_the_end_lands_on_the_end_and_says_so(tmp_path: Path, gate: Gate) -> None:
    path = tmp_path / f"short{SUFFIX}"
    write(path, 300)
    opened = read_recording(path, background=True)
    replay = ReplayBackend(opened, runs_root=tmp_path, position_s=10_000.0, playing=False)
    gate.release.set()
    assert opened.wait_indexed(60)
    replay._follow_index()
    assert replay.position_s == opened.duration_s
    assert replay.message is not None
    assert f"10000 s is past the recording's end ({opened.duration_s:.0f} s)" in replay.message


def test_damage_found_after_opening_is_shown_when_indexing_ends(tmp_path: Path, gate: Gate) -> None:
    path = tmp_path / f"cut{SUFFIX}"
    write(path, 600)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])  # truncated: the writer was killed
    opened = read_recording(path, background=True)
    replay = ReplayBackend(opened, runs_root=tmp_path, position_s=0.0, playing=False)
    assert damage_of(opened) is None
    assert replay.message is None
    gate.release.set()
    assert opened.wait_indexed(60)
    damage = damage_of(opened)
    assert damage is not None
    assert "ends early" in damage
    replay._follow_index()
    note = message_of(replay)
    assert note is not None
    assert note.startswith("recording damaged:")
    assert replay.position_s == 0.0  # nobody asked to move


def test_closing_mid_index_stops_the_thread_and_deletes_the_spool(
    tmp_path: Path, gate: Gate
) -> None:
    path = tmp_path / f"quit{SUFFIX}"
    write(path, 600)
    opened = read_recording(path, background=True)
    thread = opened.frames._indexer_thread
    fd = opened.frames._fd
    assert thread is not None
    assert thread.is_alive()
    assert fd is not None
    closer = threading.Thread(target=opened.close)
    closer.start()
    gate.release.set()  # the thread goes on to its next spool write, sees the close and ends
    closer.join(30)
    assert not closer.is_alive()
    assert not thread.is_alive()
    assert not opened.indexing
    assert opened.damage is None  # quitting is not damage
    assert len(opened.frames) == 0
    with pytest.raises(OSError):
        os.fstat(fd)


async def test_the_top_bar_shows_indexing_until_it_ends(tmp_path: Path, gate: Gate) -> None:
    path = tmp_path / f"bar{SUFFIX}"
    write(path, 600)
    opened = read_recording(path, background=True)
    replay = ReplayBackend(opened, runs_root=tmp_path / "runs", position_s=0.0, playing=False)
    app = ConsoleApp(replay)
    async with app.run_test(size=(160, 40)) as pilot:

        def bar() -> str:
            return str(app.screen.query_one(TopBar).render())

        await until(pilot, lambda: "REPLAY" in bar(), what="the replay badge")
        assert "indexing" in bar()
        gate.release.set()
        await until(pilot, lambda: "indexing" not in bar(), what="indexing to end")
        assert opened.duration_s > 500
    opened.close()


def test_play_at_the_end_of_what_is_indexed_plays_on_not_from_the_start(
    tmp_path: Path, gate: Gate
) -> None:
    path = tmp_path / f"play{SUFFIX}"
    write(path, 600)
    opened = read_recording(path, background=True)
    gate.held()
    replay = ReplayBackend(opened, runs_root=tmp_path, position_s=None, playing=False)
    end_so_far = opened.duration_s
    assert replay.position_s == end_so_far
    replay.toggle()
    assert replay.playing
    assert replay.position_s == end_so_far  # not rewound to 0: more is coming
    gate.release.set()
    assert opened.wait_indexed(60)
    replay._follow_index()  # the app's playback tick sees indexing end
    replay.toggle()  # pause
    replay.seek(opened.duration_s)
    replay.toggle()  # at the real end, play starts over
    assert replay.position_s == 0.0
