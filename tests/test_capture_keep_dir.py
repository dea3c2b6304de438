"""The capture directory around ``capture-keep.json`` and its marks (review of mend56a): both
are made under a fresh name and renamed over theirs through a descriptor of the directory
(``capture_layout._placed``). That descriptor is an ``O_PATH`` one, so a write-and-search-only
directory (mode 0300) keeps its record, as it did before the descriptor; and the fresh names a
runner killed between making one and renaming it leaves are removed by the next ring run there
(only this user's, of that exact pattern, stale). Everything here is under the test's own
directories."""

from __future__ import annotations

import json
import os
import sys
import shutil
import tempfile
import time

import pytest

from payloads import block, child_command
from processkit import capture_layout, freshnames
from streams import run_checked
from test_other_users import as_other, other_user  # noqa: F401 - the fixture: a second OS user


@pytest.fixture
def write_only_dir(other_user):  # noqa: F811
    """A capture directory of the second user's, mode 0300, in a directory of the test's (under
    /tmp: that user cannot enter pytest's own tmp_path)."""
    base = tempfile.mkdtemp(prefix="pk-capdir-")
    os.chmod(base, 0o711)
    cap = os.path.join(base, "cap")
    os.mkdir(cap)
    os.chown(cap, other_user.pw_uid, other_user.pw_gid)
    os.chmod(cap, 0o300)
    yield cap
    shutil.rmtree(base)


def test_a_write_and_search_only_capture_directory_keeps_its_record(tmp_path, write_only_dir, other_user):  # noqa: F811
    """The runner's record and marks written by a user who is not root (the interpreter here
    may be in root's private home, which that user cannot run, so this forked child, dropped to
    that user, writes them as a run does; it could not before: an O_RDONLY open of the
    directory needs read permission). They are written here first, as root, so that what they
    import lazily is imported: that user may not read the interpreter's library either."""
    warm = capture_layout.start(str(tmp_path), "r0", "tail", 1000, 0)
    assert warm is not None
    warm.forget()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(other_user.pw_gid, other_user.pw_gid, other_user.pw_gid)
            os.setresuid(other_user.pw_uid, other_user.pw_uid, other_user.pw_uid)
            live = capture_layout.start(write_only_dir, "r1", "tail", 1000, 0)
            if live is not None:
                os.rename(os.path.join(write_only_dir, capture_layout.NAME), os.path.join(write_only_dir, "live.json"))
                live.retire()
                capture_layout.record(write_only_dir, "r1", "tail", {})
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the live record or its marks could not be made"
    live_record = json.loads(open(os.path.join(write_only_dir, "live.json")).read())
    assert live_record["state"] == capture_layout.CAPTURING
    final = json.loads(open(os.path.join(write_only_dir, capture_layout.NAME)).read())
    assert final["run_id"] == "r1" and "state" not in final
    assert sorted(os.listdir(write_only_dir)) == [capture_layout.NAME, "live.json"]


def test_fresh_names_a_killed_runner_left_are_removed_by_the_next_ring_run(tmp_path):
    cap_dir = tmp_path / "cap"
    cap_dir.mkdir()
    old = time.time() - 2 * freshnames.STALE_SECONDS
    left = [cap_dir / ".capture-keep.json.0123456789ab", cap_dir / ".capture-keep.marks.cdef01234567"]
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    kept = {
        "being filled now": cap_dir / ".capture-keep.json.aaaaaaaaaaaa",
        "not the pattern": cap_dir / ".capture-keep.json.0123456789abc",
        "another name": cap_dir / ".capture-keep.json.bbbbbbbbbbbb",
        "a symlink": cap_dir / ".capture-keep.marks.cccccccccccc",
        "another user's": cap_dir / ".capture-keep.json.dddddddddddd",
    }
    for path in (*left, kept["not the pattern"], kept["being filled now"]):
        path.write_text("{}\n")
    os.link(victim, kept["another name"])
    kept["a symlink"].symlink_to(victim)
    if os.geteuid() == 0:
        kept["another user's"].write_text("{}\n")
        os.chown(kept["another user's"], 65534, 65534)
    else:
        del kept["another user's"]
    for path in (*left, *kept.values()):
        if path != kept["being filled now"]:
            os.utime(path, (old, old), follow_symlinks=False)
    command = child_command("p.write_all(1, p.block(6, 3000))")
    args = ("--capture-dir", cap_dir, "--capture-max-bytes", "1000", "--capture-keep", "tail", "--no-echo")
    proc, _ = run_checked(tmp_path, *args, command=command, returncode=0)
    assert b"could not" not in proc.stderr, proc.stderr
    assert not [path.name for path in left if os.path.lexists(path)], "a killed runner's fresh name is left"
    assert [why for why, path in kept.items() if not os.path.lexists(path)] == []
    assert victim.read_text() == "keep me\n"
    assert (cap_dir / "stdout.log").read_bytes() == block(6, 3000)[-1000:]


def test_a_ring_run_loads_the_sweep_only_where_a_fresh_name_is_left(tmp_path):
    """``capture_layout._sweep_left`` looks for a fresh name by its listing first: a directory
    with none, every ring run's usual case, costs no import of ``freshnames``; one with a stale
    fresh name has it removed."""
    import subprocess
    import sys

    stale = tmp_path / ".capture-keep.json.0123456789ab"
    script = (
        "import sys; from processkit import capture_layout as c\n"
        f"c._sweep_left({str(tmp_path)!r}); print('processkit.freshnames' in sys.modules)\n"
        f"open({str(stale)!r}, 'w').close(); import os; os.utime({str(stale)!r}, (0, 0))\n"
        f"c._sweep_left({str(tmp_path)!r}); print('processkit.freshnames' in sys.modules, os.path.exists({str(stale)!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["False", "True", "False"], result.stderr


def test_a_full_capture_directory_leaves_no_record_claiming_a_capture(tmp_path, small_tmpfs, pump_backend):
    """A ring run into a full disk: the final record could not be made beside the live one, and
    ``capture-keep.json`` was left saying ``"capturing"`` (its marks gone) after the run ended.
    The live record's own space is taken back for the final one, which describes the files."""
    from conftest import run_cli

    cap = small_tmpfs("full", "size=64k")
    stream = tmp_path / "run.jsonl"
    script = "import sys; sys.stdout.buffer.write(b'x' * 300000)"
    proc = run_cli(
        "run", "--jsonl", stream, "--capture-dir", cap, "--capture-keep", "tail", "--", sys.executable, "-c", script
    )
    assert proc.returncode == 0, proc.stderr
    assert b"a write to stdout's capture failed" in proc.stderr
    events = [json.loads(line) for line in stream.read_bytes().splitlines()]
    run_id = events[0]["run_id"]
    captured = next(event for event in events if event["event"] == "output_captured")["stdout"]
    assert captured["write_error"] and captured["bytes_seen"] == 300000
    assert sorted(os.listdir(cap)) == ["capture-keep.json", "stderr.log", "stdout.log"]
    record = json.loads((cap / "capture-keep.json").read_bytes())
    assert "state" not in record and record["run_id"] == run_id, record
    kept = record["stdout"]
    assert kept["bytes_written"] == captured["bytes_written"] == os.path.getsize(cap / "stdout.log")
    assert kept["kept"] == [[0, captured["bytes_written"]]]


def test_a_record_the_disk_cannot_hold_even_in_the_live_ones_place_is_said_gone(tmp_path, monkeypatch, capfd):
    """When not even the live record's space holds the final one, the live record is still
    removed (it would claim a capture going on) and the warning says no record is left."""
    assert capture_layout.start(str(tmp_path), "run-1-2", "tail", 4096, 0) is not None
    os.unlink(tmp_path / capture_layout.MARKS_NAME)  # retired at the run's end; the live record stays

    def full(directory, name, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(capture_layout, "_write", full)
    capture_layout.record(str(tmp_path), "run-1-2", "tail", {})
    assert not (tmp_path / capture_layout.NAME).exists()
    said = capfd.readouterr().err
    assert "No space left on device; no capture-keep.json is left (the live record was removed)" in said, said


def test_another_users_link_at_the_record_is_not_said_to_claim_a_capture(tmp_path, other_user):  # noqa: F811
    """A ring run whose ``capture-keep.json`` is another user's link (planted in a sticky
    capture directory) writes no record, live or final, and its warning says only that: it
    said the file "still says the capture is going on" of a link this run never wrote."""
    base = tempfile.mkdtemp(prefix="pk-capkeep-")
    try:
        os.chmod(base, 0o711)
        cap = os.path.join(base, "cap")
        os.mkdir(cap)
        os.chmod(cap, 0o1777)
        link = os.path.join(cap, capture_layout.NAME)
        as_other(other_user, 'ln -s /nonexistent-target "$1"', link)
        args = ["--capture-dir", cap, "--capture-keep", "tail", "--capture-max-bytes", "4096"]
        proc, _ = run_checked(tmp_path, *args, command=child_command("p.write_all(1, p.block(6, 3000))"), returncode=0)
        said = proc.stderr.decode(errors="replace")
        assert "could not record which part of each stream the capture files keep" in said, said
        assert "still says the capture is going on" not in said, said
        assert os.path.islink(link) and os.lstat(link).st_uid == other_user.pw_uid
    finally:
        shutil.rmtree(base)


def test_a_live_record_that_cannot_be_removed_is_said_to_claim_a_capture(tmp_path, monkeypatch, capfd):
    """The run's own live record, left because it could not be removed, is still named as one."""
    assert capture_layout.start(str(tmp_path), "run-1-3", "tail", 4096, 0) is not None

    def full(directory, name, data):
        raise OSError(28, "No space left on device")

    def stuck(directory, name):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(capture_layout, "_write", full)
    monkeypatch.setattr(capture_layout, "_drop", stuck)
    capture_layout.record(str(tmp_path), "run-1-3", "tail", {}, live=True)
    said = capfd.readouterr().err
    assert f"{tmp_path / capture_layout.NAME} still says the capture is going on" in said, said
    capture_layout.record(str(tmp_path), "run-1-3", "tail", {})  # not this run's: not said to be
    assert "still says" not in capfd.readouterr().err
