"""The memory of the captures searched for the lines that say why (``why_lines._SEARCHES``),
which lives as long as an API caller's process: a capture rewritten to the same size with its
mtime set back is searched again (its change time is in the key), and letting go of the oldest
search while another thread emptied the memory is no error. The module's function itself: the
memory outlives one call only in a long-lived process."""

from __future__ import annotations

import os

from processkit.report import why_lines


def _capture(path, why: str) -> None:
    path.write_text(why + "\n" + "".join(f"log line {n:04d} of the run\n" for n in range(400)))


def test_a_capture_rewritten_to_its_size_and_mtime_is_searched_again(tmp_path):
    path = tmp_path / "stdout.log"
    _capture(path, "E   assert first-one")
    found = why_lines.shown(str(path), 10, 5, [why_lines.SEARCH_BYTES])
    assert found is not None and any("first-one" in item[1] for item in found.items if isinstance(item, tuple))
    before = os.stat(path)
    _capture(path, "E   assert other-two")  # the same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    while os.stat(path).st_ctime_ns == before.st_ctime_ns:  # the change time's coarse clock moves on
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    again = why_lines.shown(str(path), 10, 5, [why_lines.SEARCH_BYTES])
    assert again is not None
    assert any("other-two" in item[1] for item in again.items if isinstance(item, tuple)), again.items


class _EmptiedMeanwhile(dict):
    """Full when its size is read, empty when its oldest is looked for: another thread forgot
    them all between the two."""

    def __len__(self) -> int:
        return why_lines._SEARCHES_KEPT


def test_letting_go_of_the_oldest_search_another_thread_forgot_is_no_error(tmp_path, monkeypatch):
    monkeypatch.setattr(why_lines, "_SEARCHES", _EmptiedMeanwhile())
    path = tmp_path / "stdout.log"
    _capture(path, "E   assert one")
    found = why_lines.shown(str(path), 10, 5, [why_lines.SEARCH_BYTES])
    assert found is not None and found.why == 1
