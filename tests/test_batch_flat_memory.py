"""A batch's memory does not grow with its number of jobs (issue 45): the manifest is read again
as the jobs start, nothing of a job that ended is kept, and the loop's heap sheds the timeouts it
cancels. Measured in this process with ``tracemalloc`` (reachable objects, collected first): what
a checked manifest holds at two sizes, and what a running batch holds at two points of its run.
"""

from __future__ import annotations

import gc
import os
import tracemalloc

from processkit.batching.manifest import read
from processkit.batching.on_host import Settings, run_batch


def _read_holds(tmp_path, count: int) -> int:
    """What a checked manifest of ``count`` jobs holds once read (``tracemalloc``'s total)."""
    path = tmp_path / f"m{count}.jsonl"
    path.write_text('{"args": ["true"], "timeout": "1h"}\n' * count)
    gc.collect()
    tracemalloc.start(1)
    try:
        with open(path, "rb") as stream:
            manifest = read(stream, str(path))
            gc.collect()
            held = tracemalloc.get_traced_memory()[0]
            getattr(manifest, "close", lambda: None)()  # a list before issue 45
            del manifest
        return held
    finally:
        tracemalloc.stop()


def test_a_checked_manifest_holds_nothing_per_job(tmp_path):
    with open(os.devnull, "rb") as empty:
        read(empty, "warm-up")  # the imports a first read makes
    grown = _read_holds(tmp_path, 3000) - _read_holds(tmp_path, 100)
    assert grown < 2900 * 16, f"{grown} bytes more for 2,900 more jobs: {grown / 2900:.0f} a job kept"


def test_a_running_batch_keeps_nothing_of_the_jobs_it_finished(tmp_path, monkeypatch):
    """What the batch holds (reachable objects: collected first) after its 60th job and after
    its 310th: the same, jobs in flight aside; each job's overall timeout (1 h) is cancelled as
    it ends, and leaves the loop's heap."""
    from processkit import loop
    from processkit.containment import pool
    from processkit.registry import tombstones

    # Bounded by design, and made small here so that what they hold at either point is noise
    # below the bound: the lodging's newest MAX_KEPT job outcomes (256), the cgroup pool's
    # MAX_IDLE idle groups a parent (64: one still charged is parked and a fresh one made), and
    # the loop's heap, which sheds its cancelled timers once they are more than half of
    # COMPACT_AT (100).
    monkeypatch.setattr(tombstones, "MAX_KEPT", 8)
    monkeypatch.setattr(pool, "MAX_IDLE", 4)
    monkeypatch.setattr(loop, "COMPACT_AT", 8, raising=False)  # none before issue 45
    path = tmp_path / "m.jsonl"
    path.write_text('{"args": ["true"], "timeout": "1h"}\n' * 320)
    held: dict[int, int] = {}

    def recorded(line, counts) -> None:
        if counts.succeeded in (60, 310):
            gc.collect()
            held[counts.succeeded] = tracemalloc.get_traced_memory()[0]

    tracemalloc.start(1)
    try:
        with open(path, "rb") as stream:
            manifest = read(stream, str(path))
            # One job at a time: at each point compared no other job is half-way through its run.
            settings = Settings(str(tmp_path / "out"), 1, keep_failed_only=True)
            # As the CLI's, a tick each second: its timer, due first, keeps the jobs' cancelled
            # timeouts behind it in the heap unless the heap sheds them.
            _, counts = run_batch(
                manifest, settings, recorded, signals=False, collect_lines=False, on_tick=lambda *_: None
            )
    finally:
        tracemalloc.stop()
    assert counts.succeeded == 320
    grown = held[310] - held[60]
    assert grown < 250 * 64, f"{grown} bytes more after 250 more jobs: {grown / 250:.0f} a job kept"


def test_a_manifest_changed_after_its_check_starts_no_job_it_no_longer_holds(tmp_path):
    """The jobs are read again as they start: a line that no longer reads as it did stops the
    starts with a setup Failure, raised once the jobs running have ended; the jobs before it
    ran and have their lines."""
    import pytest

    from processkit.errors import Failure, Kind

    path = tmp_path / "m.jsonl"
    path.write_text('{"args": ["true"], "id": "a"}\n{"args": ["true"], "id": "b"}\n')
    with open(path, "rb") as stream:
        manifest = read(stream, str(path))
        assert len(manifest) == 2
        with open(path, "r+b") as edit:  # the same file, its second line no job any more
            edit.seek(len('{"args": ["true"], "id": "a"}\n'))
            edit.write(b'{"args": 1,        "id": "b"}\n')
        with pytest.raises(Failure) as raised:
            run_batch(manifest, Settings(str(tmp_path / "out"), 1), signals=False)
    assert raised.value.kind is Kind.SETUP
    assert "the manifest changed since it was checked: manifest line 2" in raised.value.message
    assert [line.split('"')[3] for line in (tmp_path / "out" / "summary.jsonl").read_text().splitlines()] == ["a"]


def test_a_piped_manifest_is_spooled_and_read_again(tmp_path):
    import os

    read_end, write_end = os.pipe()
    lines = b"".join(b'{"args": ["true"], "id": "j%d"}\n' % n for n in range(50))
    os.write(write_end, lines)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as stream:
        manifest = read(stream, "stdin")
        assert len(manifest) == 50
        assert [job.id for job in manifest] == [f"j{n}" for n in range(50)]
        assert [job.id for job in manifest][-1] == "j49", "each pass reads from the start"
        manifest.close()


def test_duplicates_among_many_lines_are_named_with_their_first_line():
    """The uniqueness check holds a fixed-size filter, not every id: a duplicate far apart is
    still found and named with the line it was first given on."""
    import pytest

    from processkit.batching.manifest import parse
    from processkit.errors import Failure

    lines = [b'{"args": ["true"], "id": "j%d"}\n' % n for n in range(5_000)]
    assert len(parse(lines)) == 5_000
    with pytest.raises(Failure, match=r"manifest line 5001: duplicate id 'j7' \(first on line 8\)"):
        parse([*lines, b'{"args": ["true"], "id": "j7"}\n'])
    with pytest.raises(Failure, match=r"manifest line 5001: duplicate run_id 'r-1' \(first on line 3\)"):
        parse(
            [*lines[:2], b'{"args": ["true"], "run_id": "r-1"}\n', *lines[3:], b'{"args": ["true"], "run_id": "r-1"}\n']
        )


def test_the_manifest_is_read_again_a_block_at_a_time_and_a_changed_line_stops_after_the_jobs_before_it(
    tmp_path, monkeypatch
):
    """The jobs are read again ``READ_AHEAD`` lines at a time (a line parsed between two runs
    found its code cold: bench/README.md), not one as each starts; a line changed since the
    check still stops the starts there, after every job before it ran and has its line."""
    import pytest

    from processkit.batching import manifest as manifest_module
    from processkit.errors import Failure, Kind

    lines = [f'{{"args": ["true"], "id": "j{number:02d}"}}\n' for number in range(1, 71)]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(lines))
    built: list[str] = []
    real_job_from = manifest_module.job_from

    def job_from(number, value, *args, **kwargs):
        built.append(value.get("id", "") if isinstance(value, dict) else "")
        return real_job_from(number, value, *args, **kwargs)

    parsed_at_first_line: list[int] = []

    def recorded(line, counts) -> None:
        if not parsed_at_first_line:
            parsed_at_first_line.append(len(built))

    with open(path, "rb") as stream:
        manifest = read(stream, str(path))
        with open(path, "r+b") as edit:  # line 50 no job any more, the same length
            edit.seek(sum(len(line) for line in lines[:49]))
            edit.write(b'{"args": 1,        "id": "j50"}\n')
        monkeypatch.setattr(manifest_module, "job_from", job_from)
        with pytest.raises(Failure) as raised:
            run_batch(manifest, Settings(str(tmp_path / "out"), 1), recorded, signals=False)
    assert raised.value.kind is Kind.SETUP
    assert "the manifest changed since it was checked: manifest line 50" in raised.value.message
    ran = [line.split('"')[3] for line in (tmp_path / "out" / "summary.jsonl").read_text().splitlines()]
    assert ran == [f"j{number:02d}" for number in range(1, 50)]
    from processkit.batching.blocks import READ_AHEAD

    assert parsed_at_first_line[0] >= READ_AHEAD, parsed_at_first_line


def test_a_block_of_long_lines_ends_on_their_bytes(tmp_path, monkeypatch):
    """A pass over a checked manifest reads ahead by the lines' bytes as well (``BLOCK_BYTES``):
    lines of 40 KiB are parsed two at a time, not ``READ_AHEAD``, so each line's size reaches the
    blocks from the one loop over the lines (``manifest_lines.numbered_values``) that the check uses too."""
    from processkit.batching import manifest as manifest_module
    from processkit.batching.blocks import BLOCK_BYTES

    long_line = '{"args": ["true", "%s"]}\n' % ("x" * 40 * 1024)
    assert 2 * len(long_line) >= BLOCK_BYTES > len(long_line)
    path = tmp_path / "m.jsonl"
    path.write_text(long_line * 6)
    built: list[int] = []
    real_job_from = manifest_module.job_from

    def job_from(number, *args, **kwargs):
        built.append(number)
        return real_job_from(number, *args, **kwargs)

    with open(path, "rb") as stream:
        manifest = read(stream, str(path))
        monkeypatch.setattr(manifest_module, "job_from", job_from)
        jobs = iter(manifest)
        next(jobs)
        assert built == [1, 2]
        assert len(list(jobs)) == 5
        manifest.close()
    assert built == [1, 2, 3, 4, 5, 6]
