"""Other users' paths (issue 23, items 4-6; docs/threat-model.md): a runner never writes through
a path another OS user controls.

A second user, ``pkit-other``, is created for the session when the tests run as root (and
skipped cleanly otherwise); it plays the attacker in a world-writable sticky directory, as
``$TMPDIR`` on a build host. The victim is a file or directory of root's that the attacker
cannot reach; every refusal is a setup error (111) that names the reason, and leaves the
victim as it was, but for the registry: a run that cannot register there warns and its child
runs (docs/control-plane.md §2.1, the reference's rule). The user's own links and the usual device paths keep working.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile

import pytest

from conftest import SAFETY_NET, read_events, run_cli
from privileges import as_user

OTHER = "pkit-other"
PRECIOUS = b"root's precious data\n"


@pytest.fixture(scope="session")
def other_user() -> pwd.struct_passwd:
    """The attacker: a system user made for the tests (kept for later sessions)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as a second user")
    if shutil.which("setpriv") is None or shutil.which("useradd") is None:
        pytest.skip("needs setpriv and useradd to act as a second user")
    try:
        return pwd.getpwnam(OTHER)
    except KeyError:
        pass
    made = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER], capture_output=True
    )
    try:
        return pwd.getpwnam(OTHER)
    except KeyError:
        pytest.skip(f"useradd {OTHER} failed: {made.stderr.decode(errors='replace').strip()}")


def as_other(user: pwd.struct_passwd, script: str, *args) -> None:
    """Run the attacker's shell steps as ``user``; they must succeed."""
    done = subprocess.run(
        [*as_user(user), "sh", "-ec", script, "sh", *map(str, args)],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=SAFETY_NET,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def shared():
    """A world-writable sticky directory, as ``/tmp``."""
    path = tempfile.mkdtemp(prefix="pk-shared-")
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def victim(tmp_path):
    """A file of root's, in a directory the attacker cannot enter."""
    path = tmp_path / "private" / "victim"
    path.parent.mkdir()
    path.write_bytes(PRECIOUS)
    return path


def refused(result, *words: str) -> None:
    assert result.returncode == 111, (result.returncode, result.stderr)
    message = result.stderr.decode()
    assert all(word in message for word in words), message


def run_echo(tmp_path, *args):
    return run_cli("run", "--jsonl", tmp_path / "run.jsonl", *args, "--", "echo", "secret output")


# -- 4. the capture directory ------------------------------------------------------------------
def test_a_capture_file_planted_as_a_link_is_refused(tmp_path, other_user, shared, victim):
    capture = os.path.join(shared, "buildcap")
    as_other(other_user, 'mkdir "$1"; ln -s "$2" "$1/stdout.log"', capture, victim)
    refused(
        run_echo(tmp_path, "--capture-dir", capture),
        "could not set up output capture in",
        "stdout.log is a symbolic link of uid",
    )
    assert victim.read_bytes() == PRECIOUS
    assert read_events(tmp_path / "run.jsonl")[-1]["code"] == 111


def test_a_capture_file_planted_by_another_user_is_refused(tmp_path, other_user, shared):
    capture = os.path.join(shared, "buildcap")
    as_other(other_user, 'mkdir "$1"; : > "$1/stderr.log"', capture)
    refused(run_echo(tmp_path, "--capture-dir", capture), "stderr.log already exists and belongs to uid")
    assert os.path.getsize(os.path.join(capture, "stderr.log")) == 0
    assert not os.path.exists(os.path.join(capture, "stdout.log")), "what the failed setup created is removed"


def test_a_capture_directory_others_can_write_is_refused(tmp_path, other_user, shared):
    capture = os.path.join(shared, "open")
    as_other(other_user, 'mkdir "$1"; chmod 0777 "$1"', capture)
    refused(
        run_echo(tmp_path, "--capture-dir", capture), f"belongs to uid {other_user.pw_uid} and other users can write"
    )
    assert os.listdir(capture) == []


def test_a_capture_directory_linked_by_another_user_is_not_followed(tmp_path, other_user, shared, victim):
    capture = os.path.join(shared, "buildcap")
    as_other(other_user, 'ln -s "$2" "$1"', capture, victim.parent)
    refused(run_echo(tmp_path, "--capture-dir", capture), "is a symbolic link of uid", "sticky")
    assert sorted(os.listdir(victim.parent)) == ["victim"]


def test_capture_directories_made_under_a_shared_directory_and_own_links_still_work(tmp_path, other_user, shared):
    made = os.path.join(shared, "new", "deeper")
    assert run_echo(tmp_path, "--capture-dir", made).returncode == 0
    assert open(os.path.join(made, "stdout.log"), "rb").read() == b"secret output\n"
    assert os.stat(os.path.join(shared, "new")).st_uid == 0
    mine = os.path.join(shared, "mine")
    os.symlink(made, mine)
    assert run_echo(tmp_path, "--capture-dir", mine).returncode == 0


# -- 5. the --jsonl path -----------------------------------------------------------------------
@pytest.mark.parametrize("detach", [False, True], ids=["run", "detach"])
def test_a_jsonl_link_planted_by_another_user_is_not_followed(tmp_path, other_user, shared, victim, detach):
    jsonl = os.path.join(shared, "run.jsonl")
    as_other(other_user, 'ln -s "$2" "$1"', jsonl, victim)
    extra = ["--detach"] if detach else []
    result = run_cli("run", *extra, "--jsonl", jsonl, "--", "true")
    refused(result, "could not open the JSONL events file", "symbolic link of uid")
    assert victim.read_bytes() == PRECIOUS


def test_a_jsonl_file_planted_by_another_user_is_not_written(tmp_path, other_user, shared):
    jsonl = os.path.join(shared, "run.jsonl")
    as_other(other_user, ': > "$1"; chmod 0666 "$1"', jsonl)
    refused(run_cli("run", "--jsonl", jsonl, "--", "true"), "already exists and belongs to uid")
    assert os.path.getsize(jsonl) == 0


def test_a_hard_link_to_a_victim_is_not_truncated(tmp_path, other_user, shared, victim):
    """Where ``fs.protected_hardlinks`` is off another user can link a file of root's into a
    shared directory; here the link is made by root itself, as that user could there."""
    jsonl = os.path.join(shared, "run.jsonl")
    os.link(victim, jsonl)
    refused(run_cli("run", "--jsonl", jsonl, "--", "true"), "other hard links")
    assert victim.read_bytes() == PRECIOUS


def test_a_jsonl_link_in_another_users_own_directory_is_not_followed(tmp_path, other_user, shared, victim):
    """Outside a sticky directory the kernel would follow it; the file's own link must be the
    user's or root's wherever it is."""
    folder = os.path.join(shared, "theirs")
    as_other(other_user, 'mkdir "$1"; ln -s "$2" "$1/run.jsonl"', folder, victim)
    refused(run_cli("run", "--jsonl", os.path.join(folder, "run.jsonl"), "--", "true"), "symbolic link of uid")
    assert victim.read_bytes() == PRECIOUS


def test_own_links_and_device_paths_still_work(tmp_path, other_user, shared):
    real = tmp_path / "real.jsonl"
    mine = os.path.join(shared, "mine.jsonl")
    os.symlink(real, mine)
    assert run_cli("run", "--jsonl", mine, "--", "true").returncode == 0
    assert read_events(real)[-1]["event"] == "runner_exit"
    reader, writer = os.pipe()
    with os.fdopen(reader, "rb") as pipe:
        result = run_cli("run", "--jsonl", f"/dev/fd/{writer}", "--", "true", pass_fds=(writer,))
        os.close(writer)
        assert result.returncode == 0, result.stderr
        assert b'"runner_exit"' in pipe.read()
    result = run_cli("run", "--jsonl", "/dev/stderr", "--", "true")
    assert result.returncode == 0 and b'"runner_exit"' in result.stderr


# -- 6. the registry directory -----------------------------------------------------------------
# The reference's rule (docs/control-plane.md §2.1): a run that cannot register warns and its child
# still runs. A registry that is another user's, or on a path they can change, is never adopted
# (nothing written there, nothing chmod-ed); the clients that read it refuse it.
def unregistered(result, *words: str, code: int = 0) -> None:
    """The child ran (``code`` is its exit code, the run's), with the one warning naming why."""
    assert result.returncode == code, (result.returncode, result.stderr)
    message = result.stderr.decode()
    assert "warning: could not open the run registry: " in message and all(word in message for word in words), message


def test_a_registry_link_planted_by_another_user_is_not_followed(tmp_path, other_user, shared, monkeypatch):
    target = tmp_path / "root-dir"
    target.mkdir(mode=0o755)
    os.chmod(target, 0o755)
    registry = os.path.join(shared, "runs")
    as_other(other_user, 'ln -s "$2" "$1"', registry, target)
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", registry)
    unregistered(run_echo(tmp_path), "registry directory", "is a symbolic link")
    assert read_events(tmp_path / "run.jsonl")[-1]["code"] == 0, "the child ran"
    assert os.stat(target).st_mode & 0o777 == 0o755, "the link's target was not chmod-ed"
    assert os.listdir(target) == []
    refused(run_cli("list"), "is a symbolic link")


def test_a_registry_directory_of_another_user_is_not_adopted(tmp_path, other_user, shared, monkeypatch):
    registry = os.path.join(shared, "runs")
    as_other(other_user, 'mkdir "$1"; chmod 0777 "$1"', registry)
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", registry)
    result = run_cli(
        "run", "--label", "secret=label", "--jsonl", tmp_path / "r.jsonl", "--", "sh", "-c", "echo ran; exit 7"
    )
    unregistered(result, f"belongs to uid {other_user.pw_uid}, not to this user", code=7)
    assert result.stdout == b"ran\n"
    assert os.listdir(registry) == [] and os.stat(registry).st_mode & 0o777 == 0o777
    for client in (["list"], ["prune"], ["wait", "--all"]):
        refused(run_cli(*client), f"belongs to uid {other_user.pw_uid}")
    result = run_cli("cancel", "--run-id", "x")
    assert result.returncode == 103 and b"belongs to uid" in result.stderr


def test_a_registry_under_another_users_directory_is_not_made(tmp_path, other_user, shared, monkeypatch):
    theirs = os.path.join(shared, "theirs")
    as_other(other_user, 'mkdir "$1"; chmod 0755 "$1"', theirs)
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", os.path.join(theirs, "runs"))
    unregistered(run_echo(tmp_path), f"goes through {theirs}, which belongs to uid {other_user.pw_uid}")
    assert os.listdir(theirs) == []


def test_a_registry_made_in_a_shared_directory_is_private(tmp_path, other_user, shared, monkeypatch):
    registry = os.path.join(shared, "made", "runs")
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", registry)
    assert run_echo(tmp_path).returncode == 0
    for path in (registry, os.path.dirname(registry)):
        found = os.lstat(path)
        assert found.st_uid == 0 and found.st_mode & 0o077 == 0, oct(found.st_mode)


def test_a_user_namespace_where_root_shows_as_the_overflow_uid_still_works(tmp_path, other_user, shared):
    """In ``unshare -r`` the host's root owns ``/``, ``/tmp`` and ``/dev`` as the overflow uid:
    no one inside can act as it, so the path rules trust it as they trust root."""
    import processkit

    source = os.path.dirname(os.path.dirname(processkit.__file__))
    as_them = as_user(other_user)
    probe = subprocess.run([*as_them, "unshare", "-r", "stat", "-c", "%u", "/"], capture_output=True, cwd="/")
    if probe.returncode != 0 or probe.stdout.strip() == b"0" or not os.path.exists("/usr/bin/python3"):
        pytest.skip("no unprivileged user namespace that hides the host's root here")
    inside = os.path.join(shared, "inside")
    script = (
        'PYTHONPATH="$2" PROCESSKIT_CLI_REGISTRY_DIR="$1/runs" /usr/bin/python3 -m processkit run '
        '--jsonl "$1.jsonl" --capture-dir "$1/cap" -- /bin/echo inside'
    )
    done = subprocess.run(
        [*as_them, "unshare", "-r", "sh", "-c", script, "sh", inside, source],
        capture_output=True,
        cwd="/",
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert open(os.path.join(inside, "cap", "stdout.log"), "rb").read() == b"inside\n"


def test_a_group_writable_path_of_the_users_own_group_is_the_users(tmp_path, other_user, monkeypatch):
    """User-private groups (umask 002) make a user's own directories group-writable: that
    group is the user's, so the registry beneath them is still accepted. Another group's
    write bit is not."""
    home = tmp_path / "home"
    home.mkdir()
    os.chmod(home, 0o775)  # group root: the runner's own primary group
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(home / "runs"))
    assert run_echo(tmp_path).returncode == 0
    os.chown(home, 0, other_user.pw_gid)
    unregistered(run_echo(tmp_path), f"goes through {home}, which other users can write")


# -- 7. an echo into a pipe another user made --------------------------------------------------
NOBODY = 65534


@pytest.fixture
def as_nobody():
    """``setpriv`` to uid/gid 65534 by number (no passwd entry needed), and a home it owns."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the runner as another user")
    home = tempfile.mkdtemp(prefix="pk-nobody-")
    os.chmod(home, 0o755)
    os.chown(home, NOBODY, NOBODY)
    # CAP_DAC_READ_SEARCH alone: the interpreter and package may sit in root's 0700 home (CI's
    # is), and reading and searching is all it grants; opening root's pipe for writing is still
    # refused, which is the point of the test.
    caps = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *caps]
    env = dict(os.environ, PROCESSKIT_CLI_REGISTRY_DIR=f"{home}/runs", TMPDIR=home, HOME=home)
    yield prefix, home, env
    shutil.rmtree(home)


def test_an_echo_into_another_users_pipe_never_blocks_the_runner(as_nobody):
    """The caller's stdout is a pipe root made (mode 0600): a runner of uid 65534 cannot reopen
    it through /proc/self/fd for a private non-blocking description, and the shared one blocks.
    With no reader the echo used to block the loop in a write (or a splice), so ``--timeout``
    never fired; now the echo writes only what cannot block, and with a reader it is whole."""
    from conftest import cli_command

    prefix, home, env = as_nobody
    for pump in ("native", "python"):
        env["PROCESSKIT_PUMP"] = pump
        read_end, write_end = os.pipe()
        stalled = ["sh", "-c", "head -c 1000000 /dev/zero; sleep 30"]
        argv = [*prefix, *cli_command(), "run", "--jsonl", f"{home}/r.jsonl", "--timeout", "1s", "--", *stalled]
        runner = subprocess.Popen(argv, stdout=write_end, stderr=subprocess.PIPE, env=env, cwd="/")
        os.close(write_end)
        try:
            assert runner.wait(timeout=SAFETY_NET) == 106, runner.stderr.read()  # timed out, not held up
        finally:
            runner.kill()
            runner.wait()
            runner.stderr.close()
            os.close(read_end)
        read_end, write_end = os.pipe()
        counted = ["seq", "-f", "%07g", "0", "49999"]  # 400 KB through the echo
        argv = [*prefix, *cli_command(), "run", "--jsonl", f"{home}/r.jsonl", "--", *counted]
        runner = subprocess.Popen(argv, stdout=write_end, stderr=subprocess.PIPE, env=env, cwd="/")
        os.close(write_end)
        with os.fdopen(read_end, "rb") as out:
            echoed = out.read()
        assert runner.wait(timeout=SAFETY_NET) == 0, runner.stderr.read()
        runner.stderr.close()
        assert echoed == "".join(f"{i:07d}\n" for i in range(50_000)).encode(), (pump, len(echoed))
