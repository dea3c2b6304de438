"""A run's directory when ``/tmp`` is full (another user can fill it: its space or its inodes).
The reference (docs/control-plane.md §1.1): the directory is made in ``/tmp``, else in ``$TMPDIR`` where that
differs (every client and ``prune`` looks in both); one that cannot be made is a warning and ``endpoint: null``, and the
child still runs, its exit code the run's. A directory made whose lock could not be (one inode
left) is removed: ``prune`` reaps no directory without a lock, so it stayed for ever.

The full /tmp, and a /dev/shm of the test's own, are mounted in a mount namespace of the
test's own (``unshare``), so nothing outside it sees them."""

from __future__ import annotations

import json
import os

import pytest

from conftest import cli_command
from own_tmp import in_own_mounts
from test_other_users import other_user  # noqa: F401 - the session's second user (a fixture)
from test_service_scratch_full import pytestmark  # noqa: F401 - the same full tmpfs, the same needs

SHM = "mount -t tmpfs -o size=16m,mode=1777 tmpfs /dev/shm"
# /tmp a tmpfs of ``left`` + 2 inodes: its root and ``a`` leave none (no directory at all), one
# (a directory made, then no lock) or two (the directory and its lock, then no socket).
FULL = "mount -t tmpfs -o size=64k,nr_inodes={},mode=1777 tmpfs /tmp && mkdir /tmp/a"
NO_RUNDIR = [
    "warning: no run directory, so nothing this run leaves can be reaped if its runner dies: "
    "No space left on device (os error 28)",
    "warning: could not open the control transport: the run has no run directory",
]
WARNINGS = {
    0: NO_RUNDIR,
    1: NO_RUNDIR,
    2: ["warning: could not open the control transport: No space left on device (os error 28)"],
}


def _under_full_tmp(left: int, steps: str) -> tuple[str, list[str]]:
    """Shell ``steps`` (which end a run of ``exit 7`` with ``|| echo exit=$?``) under a /tmp with
    ``left`` inodes free and a /dev/shm of the test's own holding the registry (the test's own
    sits under the covered /tmp): what they said, and the CLI's warnings."""
    env = {key: value for key, value in os.environ.items() if key not in ("XDG_RUNTIME_DIR", "TMPDIR")}
    env["PROCESSKIT_CLI_REGISTRY_DIR"] = "/dev/shm/registry"
    done = in_own_mounts(f"{SHM}; {FULL.format(left + 2)}; {steps}", env)
    said, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr[-2000:]
    assert "exit=7" in said, said
    return said, [line.removeprefix("processkit-cli: ") for line in stderr.splitlines() if "warning" in line]


@pytest.mark.parametrize("left", [0, 1, 2], ids=["no-inode-left", "one-inode-left", "two-inodes-left"])
def test_a_run_under_a_full_tmp_warns_has_no_endpoint_and_still_runs(left):
    cli = " ".join(cli_command())
    run_id = f"full-tmp-{os.getpid()}"
    child = f"{cli} list --json; exit 7"  # the record as every client reads it
    said, warnings = _under_full_tmp(
        left,
        f"{cli} run --run-id {run_id} --jsonl /dev/null -- sh -c '{child}' || echo exit=$?; echo; echo left: $(ls /tmp)",
    )
    assert warnings == WARNINGS[left], warnings
    record = json.loads(next(line for line in said.splitlines() if '"health"' in line))
    assert record["run_id"] == run_id and record["endpoint"] is None, record
    assert "left: a" in said.splitlines(), said  # no pkc-* directory left behind


def test_a_run_under_a_full_tmp_makes_its_directory_in_tmpdir_as_the_reference_does():
    # The reference tries /tmp, then the platform temp directory ($TMPDIR) where it differs: its
    # socket's directory goes there, and its prune takes an endpoint in either.
    cli = " ".join(cli_command())
    run_id = f"tmpdir-{os.getpid()}"
    child = f"{cli} list --json; {cli} inspect --run-id {run_id} --json; exit 7"
    said, warnings = _under_full_tmp(
        0,
        "mkdir -m 700 /dev/shm/tmpdir; "
        f"TMPDIR=/dev/shm/tmpdir {cli} run --run-id {run_id} --jsonl /dev/null -- sh -c '{child}' || echo exit=$?; "
        "echo left: $(ls /tmp) $(ls /dev/shm/tmpdir)",
    )
    assert warnings == [], warnings
    record = json.loads(next(line for line in said.splitlines() if '"health"' in line))
    assert record["endpoint"].startswith("/dev/shm/tmpdir/pkc-"), record
    snapshot = json.loads(next(line for line in said.splitlines() if '"snapshot_version"' in line))
    assert snapshot["run_id"] == run_id
    assert "left: a" in said.splitlines(), said  # its directory removed at its end


@pytest.mark.parametrize("whose", ["another-users", "relative"])
def test_a_tmpdir_another_user_controls_or_relative_is_never_a_run_directorys_base(whose, request):
    # Another user's $TMPDIR (theirs, not sticky): they could rename the run's pkc-* there and put
    # their own under its name, and every later write by path and every client's cancel would go
    # to theirs. A relative one is another place from each working directory. Neither is used:
    # under a full /tmp the run has no directory, and nothing is made there.
    made, tmpdir = "mkdir -m 755 /dev/shm/tmpdir", "/dev/shm/tmpdir"
    if whose == "relative":
        made, tmpdir = "mkdir -m 700 /dev/shm/tmpdir", "dev/shm/tmpdir"  # from / (in_own_mounts' cwd): this user's own
    else:
        made += f"; chown {request.getfixturevalue('other_user').pw_name} /dev/shm/tmpdir"
    cli = " ".join(cli_command())
    said, warnings = _under_full_tmp(
        0,
        f"{made}; TMPDIR={tmpdir} {cli} run --jsonl /dev/null -- sh -c 'exit 7' || echo exit=$?; "
        "echo left: $(ls /dev/shm/tmpdir)",
    )
    assert warnings == NO_RUNDIR, warnings
    assert "left:" in said.splitlines(), said  # nothing made in that $TMPDIR
