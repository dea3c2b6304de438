"""``cli/bundlewrite.sweep``: the temporary files writers of the bundle left when killed while
writing are removed only in a directory of this user's that no one else can write, not reached
through a link, and there whatever their link count (no one else can have planted a link there;
a leftover a user hard-linked elsewhere is still a bundle's size kept for good otherwise)."""

from __future__ import annotations

import os

from processkit import freshnames
from processkit.cli import bundlewrite

BUNDLE = "run.bundle"
LEFT = f"{BUNDLE}-4242-0123abcd.tmp"  # a name ``bundlewrite.write`` makes


def _with_leftover(directory) -> str:
    """``directory`` (made 0700) holding a bundle and a stale temporary file of its writer's; the
    temporary file's path."""
    directory.mkdir(mode=0o700)
    os.chmod(directory, 0o700)  # whatever the umask
    (directory / BUNDLE).write_bytes(b"bundle")
    left = directory / LEFT
    left.write_bytes(b"x" * 1000)
    old = os.stat(directory / BUNDLE).st_mtime - 2 * freshnames.STALE_SECONDS
    os.utime(left, (old, old))
    return str(left)


def test_a_stale_temporary_file_with_a_second_link_is_removed_from_a_private_directory(tmp_path):
    left = _with_leftover(tmp_path / "cache")
    second = tmp_path / "cache" / "kept-elsewhere"
    os.link(left, second)
    bundlewrite.sweep(str(tmp_path / "cache" / BUNDLE))
    assert not os.path.lexists(left)
    assert second.read_bytes() == b"x" * 1000  # the other name keeps the file


def test_the_sweep_removes_only_in_a_directory_of_this_users_no_one_else_can_write(tmp_path):
    private = _with_leftover(tmp_path / "private")
    shared = _with_leftover(tmp_path / "shared")
    os.chmod(tmp_path / "shared", 0o770)  # the group may write: a file there may be another's
    linked = _with_leftover(tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for directory in ("private", "shared", "link"):
        bundlewrite.sweep(str(tmp_path / directory / BUNDLE))
    assert not os.path.lexists(private)
    assert os.path.exists(shared), "swept in a directory the group can write"
    assert os.path.exists(linked), "swept through a symlinked directory"
