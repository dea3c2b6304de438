"""Root's ``prune`` walks every directory named as a run's in the shared bases (``/tmp``,
``/dev/shm``), another user's too: root may enter one of theirs (0700), found its lock free and
took it for a dead run of its own, and unlinked their files (``live.lock``, ``pgroup``, ``groups``,
a job slot's record) and the directory: a second user's run directory, or any they planted in
that shape. A run directory that is not this user's is now left as it is (``sweep._reap_run``)."""

from __future__ import annotations

import json
import os
import shutil
import time

from conftest import run_cli
from own_tmp import own_tmp  # noqa: F401  (fixture)
from test_other_users import other_user  # noqa: F401  (fixture)

# The files a runner leaves in its directory, the other user's here, dated well past the age a
# sweep waits for a directory with no lock held (``sweep_dead.YOUNG_DIR_SECONDS``).
THEIRS = ("live.lock", "pgroup", "groups", "dead", "j00000001.json")


def test_roots_prune_leaves_another_users_run_directory(tmp_path, isolated_registry, other_user, own_tmp):  # noqa: F811
    name = f"/tmp/pkc-{4190000 + os.getpid() % 4000}-{time.time_ns():x}-0"
    theirs = own_tmp.outside(name)  # made as its owner would, in the /tmp the prune sees
    os.mkdir(theirs, 0o700)
    an_hour_ago = time.time() - 3600
    for path in [*(os.path.join(theirs, file) for file in THEIRS), theirs]:
        if path != theirs:
            open(path, "x").close()
        os.chown(path, other_user.pw_uid, other_user.pw_gid)
        os.utime(path, (an_hour_ago, an_hour_ago))
    try:
        pruned = run_cli("prune", "--json", "--report-reaped", cwd=tmp_path)
        assert pruned.returncode == 0, pruned.stderr.decode()
        assert name not in json.loads(pruned.stdout)["reaped"]["run_dirs"]
        assert sorted(os.listdir(theirs)) == sorted(THEIRS), "root's prune unlinked another user's files"
    finally:
        shutil.rmtree(theirs, ignore_errors=True)
