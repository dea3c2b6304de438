"""A writer killed between making its temporary file and renaming it over the output (SIGKILL,
an OOM kill) leaves ``.<name>.<pid>.<8 hex>.tmp`` beside the output. The next write to the same
place removes it (``userfiles._sweep_left``, ``freshnames.sweep``): only this user's regular
files with no other link, stale by the file system's clock; another user's file, a hard link
(a way to make us unlink a name that shares an inode with a file we care about), one still
being filled and another output's leftover are left as they are.
"""

from __future__ import annotations

import os
import time

from conftest import run_cli
from processkit import freshnames
from test_other_users import PRECIOUS, as_other, other_user, shared, victim  # noqa: F401  (fixtures)

LIMIT = 60


def plant(path: str, *, stale: bool = True) -> str:
    with open(path, "wb") as f:
        f.write(b"half of an old write")
    if stale:
        old = time.time() - 2 * freshnames.STALE_SECONDS
        os.utime(path, (old, old))
    return path


def test_the_next_write_removes_a_killed_writers_temporary_file_of_ones_own_only(other_user, shared, victim):
    usage = os.path.join(shared, "usage.json")
    mine = plant(os.path.join(shared, ".usage.json.4242.deadbeef.tmp"))
    filling = plant(os.path.join(shared, ".usage.json.4243.00112233.tmp"), stale=False)
    elsewhere = plant(os.path.join(shared, ".other.json.4244.deadbeef.tmp"))
    linked = os.path.join(shared, ".usage.json.4245.0badf00d.tmp")
    os.link(victim, linked)
    os.utime(linked, (time.time() - 2 * freshnames.STALE_SECONDS,) * 2)
    theirs = os.path.join(shared, ".usage.json.4246.cafef00d.tmp")
    as_other(
        other_user, 'echo theirs > "$1"; touch -d "@$2" "$1"', theirs, int(time.time() - 2 * freshnames.STALE_SECONDS)
    )
    result = run_cli(
        "run", "--jsonl", os.path.join(shared, "r.jsonl"), "--usage-file", usage, "--", "true", timeout=LIMIT
    )
    assert result.returncode == 0, result.stderr
    assert os.path.exists(usage)
    assert not os.path.exists(mine)
    assert all(map(os.path.exists, (filling, elsewhere, linked, theirs)))
    assert victim.read_bytes() == PRECIOUS and os.stat(victim).st_nlink == 2
