"""A ``prune`` walks every directory named as a run's in the shared bases (``/tmp``,
``/dev/shm``), another user's too. Root may enter one of theirs (0700): its prune passed that
user's uid as the owner, checked every group and process-group member against it, and unlinked
their files (``live.lock``, ``pgroup``, ``groups``, a job slot's record) and the directory through
an ``O_NOFOLLOW`` descriptor of it: it ended another user's dead run. A run directory that is not
this user's is now left as it is (``sweep._reap_run``), that user's own next run or prune sweeps
it, and root's prune says so in ``left``, as a non-root user's does (which said before that the
directory's lock "cannot be probed")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

import conftest
from own_tmp import own_tmp  # noqa: F401  (fixture)
from test_other_users import NOBODY, other_user  # noqa: F401  (fixture)

# The files a runner leaves in its directory, the other user's here, dated well past the age a
# sweep waits for a directory with no lock held (``sweep_dead.YOUNG_DIR_SECONDS``).
THEIRS = ("live.lock", "pgroup", "groups", "dead", "j00000001.json")
LEFT = "its run directory is another user's"


def _pruner(tmp_path, own_tmp, who: str) -> tuple[list[str], dict]:  # noqa: F811
    """The ``processkit-cli`` command of root or of uid 65534 (reading root's interpreter and
    package by ``CAP_DAC_READ_SEARCH`` alone), with a registry and home of its own."""
    if who == "root":
        return conftest.cli_command(), dict(os.environ)
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to run prune as another user")
    home = tmp_path / "nobody"
    home.mkdir(mode=0o700)
    os.chown(home, NOBODY, NOBODY)
    caps = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *caps]
    command = conftest.cli_command()  # own_tmp's mount prefix needs root: the user is taken after it
    env = dict(os.environ, PROCESSKIT_CLI_REGISTRY_DIR=f"{home}/runs", TMPDIR=str(home), HOME=str(home))
    return [*own_tmp.prefix, *as_nobody, *command[len(own_tmp.prefix) :]], env


@pytest.mark.parametrize("who", ["root", "nobody"])
def test_prune_leaves_another_users_run_directory_and_says_so(tmp_path, isolated_registry, other_user, own_tmp, who):  # noqa: F811
    name = f"/tmp/pkc-{4190000 + os.getpid() % 4000}-{time.time_ns():x}-0"
    theirs = own_tmp.outside(name)  # made as its owner would, in the /tmp the prune sees
    os.mkdir(theirs, 0o700)
    an_hour_ago = time.time() - 3600
    for path in [*(os.path.join(theirs, file) for file in THEIRS), theirs]:
        if path != theirs:
            open(path, "x").close()
        os.chown(path, other_user.pw_uid, other_user.pw_gid)
        os.utime(path, (an_hour_ago, an_hour_ago))
    command, env = _pruner(tmp_path, own_tmp, who)
    try:
        for flags in (["--json", "--report-reaped"], []):
            done = subprocess.run(
                [*command, "prune", *flags], cwd=tmp_path, env=env, capture_output=True, timeout=conftest.SAFETY_NET
            )
            assert done.returncode == 0, done.stderr.decode()
            if "--json" in flags:
                reaped = json.loads(done.stdout)["reaped"]
                assert name not in reaped["run_dirs"]
                assert {"what": name, "reason": LEFT} in reaped["left"], reaped["left"]
            else:
                assert f"left {name}: {LEFT}\n" in done.stdout.decode(), done.stdout.decode()
            assert sorted(os.listdir(theirs)) == sorted(THEIRS), "a prune unlinked another user's files"
    finally:
        shutil.rmtree(theirs, ignore_errors=True)
