"""The child's working directory (``run --cwd``, a batch's, the API's ``cwd=``) is where the child,
often root's build, reads its inputs and writes its outputs. Another user's symbolic link at that
name in ``/tmp`` (``/tmp/build -> /etc``, where ``fs.protected_symlinks`` is off) was followed: the
child ran in a directory of root's that user chose, and its relative writes landed there. The
directory is now reached as an input's is (``userwalk.input_directory``): another user's link at
the name is refused (111, naming the link's owner) before anything is spawned; the user's own
links, and a directory that is missing or a file (101, the spawn's words), are as before. With a
second OS user, as tests/test_other_users.py makes it.

Judged at every run, never from a cache: the walk's result was remembered by the directory the
name led to, so a link swapped in at a name judged before (to that same directory, or to one of
root's given a freed inode) was followed by the same process's next run. And a link whose target
is missing at the check is still refused (it was passed over unwalked, and the chdir followed it
once the target was made)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import SAFETY_NET, read_events, run_cli
from test_other_users import as_other, other_user, refused, shared  # noqa: F401  (fixtures)

# The child writes a file into its working directory: it must never land in root's directory.
WRITES_HERE = ["sh", "-c", "echo planted > written-by-child"]


def _roots_directory(tmp_path):
    """A directory of root's the attacker cannot enter."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    return private


def test_another_users_link_at_the_cwd_is_not_followed(tmp_path, other_user, shared):  # noqa: F811
    private = _roots_directory(tmp_path)
    planted = os.path.join(shared, "build")
    as_other(other_user, 'ln -s "$2" "$1"', planted, private)
    result = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--cwd", planted, "--", *WRITES_HERE, cwd=tmp_path)
    refused(result, "could not use the working directory", "symbolic link of uid")
    assert len(result.stderr.decode().strip().splitlines()) == 1, result.stderr
    assert not (private / "written-by-child").exists()
    assert read_events(tmp_path / "run.jsonl")[-1]["code"] == 111


def test_a_batch_jobs_cwd_through_another_users_link_is_refused(tmp_path, other_user, shared):  # noqa: F811
    private = _roots_directory(tmp_path)
    planted = os.path.join(shared, "build")
    as_other(other_user, 'ln -s "$2" "$1"', planted, private)
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": WRITES_HERE, "cwd": planted}) + "\n")
    run_cli("batch", manifest, "--out", tmp_path / "out", cwd=tmp_path)
    assert not (private / "written-by-child").exists()
    line = json.loads((tmp_path / "out" / "summary.jsonl").read_text().splitlines()[0])
    assert line["exit_code"] == 111, line


API = """
import sys, processkit
done = processkit.run(sys.argv[2:], cwd=sys.argv[1])
print(done.returncode)
"""


def test_the_apis_cwd_through_another_users_link_is_refused(tmp_path, other_user, shared):  # noqa: F811
    private = _roots_directory(tmp_path)
    planted = os.path.join(shared, "build")
    as_other(other_user, 'ln -s "$2" "$1"', planted, private)
    done = subprocess.run(
        [sys.executable, "-c", API, planted, *WRITES_HERE], capture_output=True, timeout=SAFETY_NET, cwd=tmp_path
    )
    assert not (private / "written-by-child").exists()
    assert done.stdout.split()[-1:] == [b"111"], done


# Runs once, waits for a line on stdin (the attacker's swap), runs again at the same name.
API_TWICE = """
import sys, processkit
print(processkit.run(sys.argv[2:], cwd=sys.argv[1]).returncode, flush=True)
sys.stdin.readline()
print(processkit.run(sys.argv[2:], cwd=sys.argv[1]).returncode, flush=True)
"""


def test_a_link_swapped_in_after_a_first_run_is_refused_at_the_next(tmp_path, other_user, shared):  # noqa: F811
    build = os.path.join(shared, "build")
    as_other(other_user, 'mkdir -m 777 "$1"', build)
    caller = subprocess.Popen(
        [sys.executable, "-c", API_TWICE, build, "true"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=tmp_path,
    )
    try:
        assert caller.stdout.readline().split() == [b"0"]  # their directory, no link: it runs
        # The same directory, now reached through their link: a fresh process refuses it.
        as_other(other_user, 'mv "$1" "$1.real"; ln -s "$1.real" "$1"', build)
        out, _ = caller.communicate(b"go\n", timeout=SAFETY_NET)
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
    assert out.split() == [b"111"], out


def test_another_users_link_to_a_missing_target_is_refused(tmp_path, other_user, shared):  # noqa: F811
    planted = os.path.join(shared, "build")
    as_other(other_user, 'ln -s "$2" "$1"', planted, tmp_path / "not-yet")
    result = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--cwd", planted, "--", "true", cwd=tmp_path)
    refused(result, "could not use the working directory", "symbolic link of uid")


def test_a_walk_that_fails_otherwise_refuses_the_run(tmp_path, monkeypatch):
    """Not the spawn's chdir to find out: the run never goes on unjudged (EMFILE, ENOMEM)."""
    import errno

    import processkit.userwalk as userwalk
    from processkit.engine import launch
    from processkit.errors import Failure, Kind

    def exhausted(path):
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(userwalk, "input_directory", exhausted)
    try:
        launch._judge_cwd(str(tmp_path))
    except Failure as failure:
        assert failure.kind is Kind.SETUP and "could not use the working directory" in failure.message
    else:
        raise AssertionError("the run went on unjudged")


def test_only_a_named_cwd_is_judged():
    """The API's implicit cwd is its caller's ``getcwd``, which holds no link: not walked."""
    from processkit.api.launch import _anchored
    from processkit.spec import RunSpec

    spec = RunSpec(argv=("true",), jsonl="", run_id="r", run_id_given=False)
    assert _anchored(spec)[0].cwd_implicit
    assert not _anchored(spec.replace(cwd=os.getcwd()))[0].cwd_implicit


def test_the_users_own_link_at_the_cwd_still_works(tmp_path, shared):
    own = _roots_directory(tmp_path)
    link = os.path.join(shared, "mine")
    os.symlink(own, link)
    result = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--cwd", link, "--", *WRITES_HERE, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (own / "written-by-child").read_text() == "planted\n"
    missing = run_cli("run", "--jsonl", tmp_path / "gone.jsonl", "--cwd", tmp_path / "gone", "--", "true", cwd=tmp_path)
    assert missing.returncode == 101, missing.stderr


# The name swapped between the judgement and the spawn, as another user racing a directory and a
# link at it would: the judged directory renamed away, a link to another put at the name.
SWAPPED_AFTER_JUDGEMENT = (
    "(lambda judged: lambda cwd: [judged(cwd), __import__('os').rename(cwd, cwd + '.judged'),"
    " __import__('os').symlink(cwd + '.elsewhere', cwd)][0])"
    "(importlib.import_module('processkit.engine.launch')._judge_cwd)"
)


def test_the_child_changes_to_the_directory_judged_not_to_the_name_again(tmp_path, pump_backend, spawn_backend):
    named = tmp_path / "build"
    named.mkdir()
    (tmp_path / "build.elsewhere").mkdir()
    result = run_cli(
        "run", "--jsonl", tmp_path / "run.jsonl", "--cwd", named, "--", *WRITES_HERE,
        cwd=tmp_path, patched=("launch", "_judge_cwd", SWAPPED_AFTER_JUDGEMENT),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "build.judged" / "written-by-child").read_text() == "planted\n"
    assert not (tmp_path / "build.elsewhere" / "written-by-child").exists()


# Nothing at the name at the judgement, a link to another directory put there before the spawn.
LINKED_AFTER_JUDGEMENT = (
    "(lambda judged: lambda cwd: [judged(cwd), __import__('os').symlink(cwd + '.elsewhere', cwd)][0])"
    "(importlib.import_module('processkit.engine.launch')._judge_cwd)"
)


def test_a_name_missing_at_the_judgement_is_not_taken_again(tmp_path, pump_backend, spawn_backend):
    (tmp_path / "build.elsewhere").mkdir()
    named = tmp_path / "build"
    result = run_cli(
        "run", "--jsonl", tmp_path / "run.jsonl", "--cwd", named, "--", *WRITES_HERE,
        cwd=tmp_path, patched=("launch", "_judge_cwd", LINKED_AFTER_JUDGEMENT),
    )  # fmt: skip
    assert result.returncode == 101, result.stderr
    assert result.stderr.decode() == f"processkit-cli: cannot use --cwd {named}: No such file or directory\n"
    assert not (tmp_path / "build.elsewhere" / "written-by-child").exists()


# Runs in a named cwd, spawned, failed to spawn, and refused by the chdir, then lists what the
# service holds open on that directory: the judged directory's handle is given back on every path.
# (Its other descriptors vary: a pool of containers made ahead.)
API_DESCRIPTORS = """
import os, sys, processkit
here = os.path.realpath(sys.argv[1])
pid = processkit.run(["true"], cwd=here).runner_pid
for _ in range(5):
    assert processkit.run(["true"], cwd=here).runner_pid == pid
    for command, cwd in ((["/no/such/program"], here), (["true"], here + "/gone"), (["true"], "/etc/passwd")):
        try:
            processkit.run(command, cwd=cwd)
        except OSError:
            pass
def target(fd):
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}")
    except FileNotFoundError:  # closed by the service between the listing and this look
        return None
held = [fd for fd in os.listdir(f"/proc/{pid}/fd") if target(fd) == here]
print(len(held))
"""


def test_the_judged_directory_is_closed_after_the_spawn(tmp_path, pump_backend, spawn_backend):
    done = subprocess.run(
        [sys.executable, "-c", API_DESCRIPTORS, tmp_path], capture_output=True, timeout=SAFETY_NET, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.split() == [b"0"], done.stdout
