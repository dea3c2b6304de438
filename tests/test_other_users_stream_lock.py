"""Another user's lock on a run's stream or a batch's summary refuses no run and no batch. A run
holds its ``--jsonl`` alone by an exclusive lock of its open file description (``F_OFD_SETLK``,
one stream, one run: tests/test_shared_jsonl.py), which any lock in its way refused, a read lock
too: ``pkit-other`` (test_other_users.py's second user), who may read root's stream where the
umask left it readable (0644), took one and root's next ``run --jsonl`` of that path failed (111,
"another run is writing it") without starting its child, for as long as it held it. A read lock
is no run writing the file: the run now writes it unlocked, and a lock of its own keyed by the
file in the user's registry keeps a second run out of the file meanwhile (docs/run.md): that
run goes on without a stream (one warning, tests/test_shared_jsonl_runs.py), as under a write
lock (a runner's), with the C module and without it. A batch's ``summary.jsonl`` (0644) was guarded by
a ``flock``, which anyone who can open the file may take, exclusive too: such a lock kept root's
batch out of its own ``--out`` (111, "another batch is writing into it now"). A batch now locks a
file of its own in ``--out`` (``.batch-lock``, 0600), which no other user can open: neither a
``flock`` nor a read lock on the summary keeps a batch out, nor lets a second batch in."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import struct
import subprocess

import pytest

from conftest import SAFETY_NET, cli_command, cli_without_native, read_events, run_cli, start_cli, wait_for_event
from privileges import without_file_override
from privileges import as_user
from test_batch_out_shared import _held, _refused_as_busy
from test_other_users import other_user, shared  # noqa: F401  (fixtures)

LOCKER = """
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
if sys.argv[2] == "flock":
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
else:
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
print("held", flush=True)
sys.stdin.read()
"""


def _run(jsonl: str, native: bool, *command: str) -> subprocess.CompletedProcess:
    cli = cli_command() if native else cli_without_native()
    return subprocess.run(
        [*cli, "run", "--jsonl", jsonl, "--", *command],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=SAFETY_NET,
    )


def _locked(other_user, path: str, kind: str) -> subprocess.Popen:  # noqa: F811
    """``path`` (root's, 0644) locked by the second user until its stdin closes."""
    python = shutil.which("python3", path="/usr/bin:/bin")  # one the second user can run
    if python is None:
        pytest.skip("needs a system python3 the second user can run")
    os.chmod(path, 0o644)  # as umask 022 leaves it: readable by every user
    locker = subprocess.Popen(
        [*as_user(other_user), python, "-c", LOCKER, path, kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd="/",
    )
    assert locker.stdout is not None and locker.stdout.readline() == b"held\n", locker.communicate(timeout=SAFETY_NET)
    return locker


def _place(shared: str) -> str:  # noqa: F811
    place = os.path.join(shared, "ci")
    os.mkdir(place)
    os.chmod(place, 0o755)  # root's, every user may look in
    return place


@pytest.mark.parametrize("native", [True, False], ids=["native", "no-native"])
def test_another_users_read_lock_on_the_stream_refuses_no_run(other_user, shared, native):  # noqa: F811
    jsonl = os.path.join(_place(shared), "run.jsonl")
    assert _run(jsonl, native, "true").returncode == 0
    locker = _locked(other_user, jsonl, "read")
    try:
        ran = _run(jsonl, native, "echo", "ran")
        assert (ran.returncode, ran.stdout) == (0, b"ran\n"), ran.stderr
        events = [json.loads(line) for line in open(jsonl, encoding="utf-8")]
        assert events[0]["event"] == "run_started" and events[-1]["event"] == "runner_exit"
        assert events[-1]["code"] == 0
    finally:
        locker.communicate(timeout=SAFETY_NET)  # its stdin closed: the lock goes with it


@pytest.mark.parametrize(
    "locked, released, same",
    [("stream", False, False), ("stream", True, False), ("capture", True, False), ("capture", False, True)],
    ids=["held", "gone", "capture", "capture-same-flags"],
)
def test_a_file_written_unlocked_still_keeps_a_second_run_out(other_user, shared, locked, released, same):  # noqa: F811
    """While ``pkit-other``'s read lock keeps root's stream (or capture files) unlocked, the run
    holds a key of the file in root's registry (``registry.stream_guard``): a second run given that
    ``--jsonl`` goes on without writing it (its child runs, its events go nowhere), one given that
    ``--capture-dir`` is refused (111), while the lock is held and once it is gone, and the first
    run's files stay whole. Before, the second ran and wrote into them, or took the freed lock
    and emptied them. A second run given both of the first's flags (``same``) leaves the stream
    and still holds a key: it was keyless, so it emptied and rewrote the capture files."""
    place = _place(shared)
    jsonl, capture = os.path.join(place, "run.jsonl"), os.path.join(place, "cap")
    os.mkdir(capture)
    targets = [jsonl] if locked == "stream" else [os.path.join(capture, name) for name in ("stdout.log", "stderr.log")]
    for target in targets:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    lockers = [_locked(other_user, target, "read") for target in targets]
    first = start_cli(
        "run", "--inherit-stdin", "--jsonl", jsonl, "--capture-dir", capture, "--", "cat", stdin=subprocess.PIPE
    )
    try:
        wait_for_event(jsonl, "run_started")
        for locker in lockers if released else ():
            locker.communicate(timeout=SAFETY_NET)
        if locked == "stream":
            second = run_cli("run", "--jsonl", jsonl, "--", "echo", "second")
        elif same:
            second = run_cli("run", "--jsonl", jsonl, "--capture-dir", capture, "--", "echo", "second")
        else:
            second = run_cli(
                "run", "--jsonl", os.path.join(place, "again.jsonl"), "--capture-dir", capture, "--", "true"
            )
        assert first.stdin is not None
        first.stdin.write(b"first\n")
    finally:
        first.communicate(timeout=SAFETY_NET)  # its stdin closed: cat ends, and the run
        for locker in lockers:
            locker.communicate(timeout=SAFETY_NET)
    if locked == "stream":
        assert (second.returncode, second.stdout) == (0, b"second\n"), second.stderr
        assert b"JSONL event logging disabled: could not open the JSONL events file" in second.stderr
    else:
        assert (second.returncode, second.stdout) == (111, b""), second.stderr
        assert b"could not set up output capture in" in second.stderr
    assert b"a process holds a lock on it" in second.stderr
    events = read_events(jsonl)
    assert [e["event"] for e in events].count("run_started") == 1, events
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "runner_exit", events
    assert (first.returncode, events[-1]["code"]) == (0, 0)
    with open(os.path.join(capture, "stdout.log"), "rb") as captured:
        assert captured.read() == b"first\n"


def test_a_stream_in_the_capture_dir_written_unlocked_keeps_a_second_runs_capture_out(other_user, shared):  # noqa: F811
    """The first run's stream is ``cap/stdout.log``, which ``pkit-other``'s read lock keeps
    unlocked; a second run given that ``--jsonl`` and ``--capture-dir cap`` leaves the stream and
    is refused at its capture (111): its key finds the first run's. Before, keyless,
    it emptied the file and wrote its output into the first run's stream."""
    capture = os.path.join(_place(shared), "cap")
    os.mkdir(capture)
    jsonl = os.path.join(capture, "stdout.log")
    os.close(os.open(jsonl, os.O_WRONLY | os.O_CREAT, 0o644))
    locker = _locked(other_user, jsonl, "read")
    first = start_cli("run", "--inherit-stdin", "--jsonl", jsonl, "--", "cat", stdin=subprocess.PIPE)
    try:
        wait_for_event(jsonl, "run_started")
        second = run_cli("run", "--jsonl", jsonl, "--capture-dir", capture, "--", "echo", "second")
    finally:
        first.communicate(b"", timeout=SAFETY_NET)
        locker.communicate(timeout=SAFETY_NET)
    assert (second.returncode, second.stdout) == (111, b""), second.stderr
    assert b"could not set up output capture in" in second.stderr
    events = read_events(jsonl)  # the first run's stream, whole: nothing of the second's
    assert [e["event"] for e in events].count("run_started") == 1, events
    assert (first.returncode, events[-1]["event"], events[-1]["code"]) == (0, "runner_exit", 0), events


def test_another_users_read_lock_on_a_capture_file_refuses_no_run(other_user, shared):  # noqa: F811
    """A capture file is locked as a stream is (one capture, one run): ``pkit-other``'s read lock
    on root's 0644 ``stdout.log`` refused root's next ``run --capture-dir`` (111) too."""
    place = _place(shared)
    capture, jsonl = os.path.join(place, "cap"), os.path.join(place, "run.jsonl")
    assert run_cli("run", "--jsonl", jsonl, "--capture-dir", capture, "--", "true").returncode == 0
    locker = _locked(other_user, os.path.join(capture, "stdout.log"), "read")
    try:
        ran = run_cli("run", "--jsonl", jsonl, "--capture-dir", capture, "--", "echo", "ran")
        assert (ran.returncode, ran.stdout) == (0, b"ran\n"), ran.stderr
        with open(os.path.join(capture, "stdout.log"), "rb") as captured:
            assert captured.read() == b"ran\n"
    finally:
        locker.communicate(timeout=SAFETY_NET)


@pytest.mark.parametrize("native", [True, False], ids=["native", "no-native"])
def test_a_write_lock_on_the_stream_keeps_the_run_out_of_it(tmp_path, native):
    """A write lock is a runner's: the run writes nothing into the file (one warning), and its
    child runs (it was refused, 111, as the reference never refuses a run its stream's file)."""
    jsonl = str(tmp_path / "run.jsonl")
    held = os.open(jsonl, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.fcntl(held, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        ran = _run(jsonl, native, "echo", "ran")
    finally:
        os.close(held)
    assert (ran.returncode, ran.stdout) == (0, b"ran\n"), ran.stderr
    assert b"JSONL event logging disabled: could not open the JSONL events file" in ran.stderr
    assert b"a process holds a lock on it" in ran.stderr
    assert os.path.getsize(jsonl) == 0


def test_another_users_read_lock_on_a_batch_summary_lets_no_second_batch_in(other_user, shared, tmp_path):  # noqa: F811
    """Two root batches into one ``--out`` while ``pkit-other`` holds a read lock on its
    ``summary.jsonl``: the second is refused (111), and the summary is the first one's alone."""
    out = os.path.join(_place(shared), "out")
    assert run_cli("batch", "--out", out, "--", "true", ":::", "z").returncode == 0
    locker = _locked(other_user, os.path.join(out, "summary.jsonl"), "read")
    try:
        with _held(tmp_path, out) as first:
            second = run_cli("batch", "--out", out, "--", "echo", "second", ":::", "b")
    finally:
        locker.communicate(timeout=SAFETY_NET)
    _refused_as_busy(second)
    assert first.returncode == 0, first.held_err
    with open(os.path.join(out, "summary.jsonl"), encoding="utf-8") as summary:
        assert [json.loads(line)["id"] for line in summary] == ["a"]
    assert not os.path.exists(os.path.join(out, "b"))


def test_another_users_flock_on_a_batch_summary_keeps_no_batch_out(other_user, shared):  # noqa: F811
    out = os.path.join(_place(shared), "out")
    manifest = os.path.join(shared, "jobs.jsonl")
    with open(manifest, "w", encoding="utf-8") as jobs:
        jobs.write(json.dumps({"id": "a", "args": ["true"]}) + "\n")
    first = subprocess.run([*cli_command(), "batch", "--out", out, manifest], capture_output=True, timeout=SAFETY_NET)
    assert first.returncode == 0, first.stderr
    locker = _locked(other_user, os.path.join(out, "summary.jsonl"), "flock")
    try:
        again = subprocess.run(
            [*cli_command(), "batch", "--out", out, manifest], capture_output=True, timeout=SAFETY_NET
        )
        assert again.returncode == 0, again.stderr
    finally:
        locker.communicate(timeout=SAFETY_NET)


@pytest.mark.parametrize("made", ["umask-0277", "older-0400", "older-0000"])
def test_a_key_made_under_a_strict_umask_still_keeps_a_second_run_out(other_user, shared, isolated_registry, made):  # noqa: F811
    """A stream's key is 0600 whatever the umask: made under the caller's 0277 (the API's service
    runs a call under it: engine/callers_umask) it was 0400, under 0777 0000, and root without
    file-permission override could not open it again for its lock: a second run of the stream,
    ``pkit-other``'s read lock still on it, went unguarded and wrote into the first one's
    stream. A key an older run left so is made 0600 again; the second run goes on without it."""
    jsonl = os.path.join(_place(shared), "run.jsonl")
    os.close(os.open(jsonl, os.O_WRONLY | os.O_CREAT, 0o644))
    if made != "umask-0277":
        found = os.stat(jsonl)
        key = os.path.join(isolated_registry, f".stream-{found.st_dev:x}-{found.st_ino:x}")
        os.close(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600))
        os.chmod(key, int(made[-4:], 8))
    locker = _locked(other_user, jsonl, "read")
    first = subprocess.Popen(
        [*without_file_override(), *cli_command(), "run", "--inherit-stdin", "--jsonl", jsonl, "--", "cat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        umask=0o277 if made == "umask-0277" else -1,
    )
    try:
        wait_for_event(jsonl, "run_started")
        second = subprocess.run(
            [*without_file_override(), *cli_command(), "run", "--jsonl", jsonl, "--", "echo", "second"],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=SAFETY_NET,
        )
    finally:
        out, err = first.communicate(b"first\n", timeout=SAFETY_NET)
        locker.communicate(timeout=SAFETY_NET)
    assert (second.returncode, second.stdout) == (0, b"second\n"), second.stderr
    assert b"JSONL event logging disabled" in second.stderr
    assert (first.returncode, out) == (0, b"first\n"), err
    events = read_events(jsonl)
    assert [e["event"] for e in events].count("run_started") == 1, events
