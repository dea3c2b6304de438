"""The child's working directory is the directory ``launch`` judged, reached by its descriptor,
on either spawn: the native child ``fchdir``s to it; the Popen fallback (``PROCESSKIT_SPAWN=python``)
changed to ``/proc/self/fd/N`` and, where the runner's ``/proc/self/fd`` showed no such entry,
to the name again, so a directory renamed and another made at its name between the judging and
the spawn received the child (and its relative writes). It now ``fchdir``s in its preexec_fn too.
A refused ``fchdir`` is said as the native child says it (101, the errno's words). Needs root
and ``unshare``: the runner's ``/proc/PID/fd`` is hidden by a bind mount in a mount namespace
of the test's own."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command, read_events
from own_tmp import PRIVATE_MOUNTS

BACKENDS = [(spawn, pump) for spawn in ("native", "python") for pump in ("native", "python")]

# The runner reads the env file (a FIFO) once the cwd is judged: the test's open of its write end
# returns at the runner's first open, and a write of more than a pipe holds (a comment line) returns
# once the runner reads, past its second open (through its /proc/self/fd). Then the directory is
# moved, another made at the name and the runner's /proc/PID/fd hidden; only then does the file end.
RACE = """
cd "$1" && shift
"$@" &
runner=$!
exec 3>env.fifo
printf '#%0200000d\\nX=1\\n' 0 >&3
mv work work.judged && mkdir work
mount --bind empty /proc/$runner/fd
exec 3>&-
wait $runner
"""


def _root_with_unshare() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")


@pytest.mark.parametrize(("spawn", "pump"), BACKENDS)
def test_the_child_runs_in_the_directory_judged_not_at_its_name_again(tmp_path, spawn, pump):
    _root_with_unshare()
    for name in ("work", "empty"):
        (tmp_path / name).mkdir()
    os.mkfifo(tmp_path / "env.fifo")
    run = [*cli_command(), "run", "--jsonl", "run.jsonl", "--cwd", "work", "--env-file", "env.fifo"]
    command = [*PRIVATE_MOUNTS, "sh", "-c", RACE, "sh", str(tmp_path), *run, "--", "touch", "written"]
    env = {**os.environ, "PROCESSKIT_SPAWN": spawn, "PROCESSKIT_PUMP": pump}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=SAFETY_NET)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "work.judged" / "written").exists()
    assert not (tmp_path / "work" / "written").exists()


def test_a_refused_fchdir_is_said_alike_by_either_spawn(tmp_path):
    """Root without its capabilities (an empty bounding set) may not enter a directory of mode
    000: the judged handle's ``fchdir`` fails EACCES in the child, after the judging. It guards
    that both spawns give the same message; it is not a regression test (it passes before too)."""
    _root_with_unshare()
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv")
    (tmp_path / "locked").mkdir(mode=0o000)
    said = set()
    for spawn in ("native", "python"):
        stream = tmp_path / f"{spawn}.jsonl"
        command = ["setpriv", "--bounding-set", "-all", "--", *cli_command(), "run", "--jsonl", str(stream)]
        env = {**os.environ, "PROCESSKIT_SPAWN": spawn}
        done = subprocess.run(
            [*command, "--cwd", "locked", "--", "true"], cwd=tmp_path, env=env, capture_output=True, timeout=SAFETY_NET
        )
        assert done.returncode == 101, done.stderr
        said.add(done.stderr)
        assert read_events(stream)[-1]["code"] == 101
    assert said == {f"processkit-cli: cannot use --cwd {tmp_path / 'locked'}: Permission denied\n".encode()}
