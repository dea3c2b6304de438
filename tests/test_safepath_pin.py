"""``safepath.pin``: walks of paths inside a pinned directory start from its handle (a batch's
``--out``, under which every job makes five files), not from ``/`` again."""

from __future__ import annotations

import os

import pytest

from processkit import safepath


def test_a_path_inside_a_pinned_directory_is_walked_from_its_handle(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    safepath.pin(str(out))
    try:
        os.rename(out, tmp_path / "moved")  # the text now names nothing: only the handle leads there
        fd, here = safepath.open_directory(str(out / "job" / "capture"))
        os.close(fd)
        os.close(safepath.open_for_writing(str(out / "job" / "events.jsonl")))
        assert here == str(out / "job" / "capture")  # the text the walk from / would have given
    finally:
        safepath.unpin(str(out))
    assert sorted(os.listdir(tmp_path / "moved" / "job")) == ["capture", "events.jsonl"]
    with pytest.raises(FileNotFoundError):  # unpinned: walked from / again
        safepath.open_for_writing(str(out / "job" / "events.jsonl"))


def test_a_dot_dot_climbing_above_a_pinned_directory_is_walked_from_its_path_not_its_handle(tmp_path):
    """``PIN/x/../../f`` leaves the pinned directory: from its handle the ``..`` would climb from
    wherever a link in the pinned path led, unjudged; walked from its text instead. A ``..``
    that stays inside (``PIN/x/../f``) is still walked from the handle."""
    out = tmp_path / "out"
    (out / "x").mkdir(parents=True)
    safepath.pin(str(out))
    try:
        os.rename(out, tmp_path / "moved")  # the text now names nothing: only the handle leads there
        with pytest.raises(FileNotFoundError):
            safepath.open_for_writing(f"{out}/x/../../f")
        os.close(safepath.open_for_writing(f"{out}/x/../f"))
    finally:
        safepath.unpin(str(out))
    assert sorted(os.listdir(tmp_path)) == ["moved"]
    assert sorted(os.listdir(tmp_path / "moved")) == ["f", "x"]


def test_a_pin_is_held_until_its_last_unpin(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    safepath.pin(str(out) + "/")
    safepath.pin(str(out))  # a second batch on the same directory (a Dask worker's threads)
    safepath.unpin(str(out))
    os.rename(out, tmp_path / "moved")
    try:
        os.close(safepath.open_for_writing(str(out / "f")))
    finally:
        safepath.unpin(str(out))
    assert (tmp_path / "moved" / "f").exists() and not safepath._PINNED


def test_a_private_walk_never_starts_from_a_pin(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    safepath.pin(str(out))
    try:
        os.rename(out, tmp_path / "moved")
        (tmp_path / "moved" / "registry").mkdir(mode=0o700)  # found only through the pin's handle
        assert safepath.private_directory(str(out / "registry"), create=False) is None
    finally:
        safepath.unpin(str(out))


def test_a_judged_handle_given_for_a_pinned_path_must_be_the_pinned_directory(tmp_path):
    """``pin(path, judged)`` where ``path`` is pinned already: the caller's handle is closed and
    the pin held again only when both are one directory; another is refused, not silently swapped."""
    out, other = tmp_path / "out", tmp_path / "other"
    out.mkdir()
    other.mkdir()
    safepath.pin(str(out))
    try:
        same = os.open(out, os.O_PATH | os.O_DIRECTORY)
        safepath.pin(str(out), (same, str(out)))
        safepath.unpin(str(out))
        elsewhere = os.open(other, os.O_PATH | os.O_DIRECTORY)
        given = os.fstat(elsewhere)
        with pytest.raises(safepath.UnsafePath, match="no longer the directory pinned"):
            safepath.pin(str(out), (elsewhere, str(other)))
        assert _inode(elsewhere) != (given.st_dev, given.st_ino)  # consumed all the same (its number free or reused)
    finally:
        safepath.unpin(str(out))
    assert not safepath._PINNED


def _inode(fd: int) -> tuple[int, int] | None:
    """What the descriptor ``fd`` names now, None when it is closed."""
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _open_descriptors() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


def test_report_dir_pinned_already_as_another_directory_is_a_refusal_and_its_handle_closed(tmp_path):
    """``report.inputs.judged_directory`` of a path pinned already as another directory (swapped
    since): ``pin`` refuses it; the judged handle is closed and the refusal is a ``Failure`` (111)
    naming the directory, as the other refusals are, not an UnsafePath escaping."""
    from processkit.errors import Failure
    from processkit.report import inputs

    given = tmp_path / "given"
    given.mkdir()
    with inputs.judged_directory([str(given)]):
        os.rename(given, tmp_path / "moved")
        given.mkdir()
        before = _open_descriptors()
        with pytest.raises(Failure, match=f"cannot read {given}: .*no longer the directory pinned") as refused:
            with inputs.judged_directory([str(given)]):
                pass
        assert refused.value.code == 111
        assert _open_descriptors() == before
    assert not safepath._PINNED
