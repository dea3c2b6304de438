"""``--capture-keep tail`` and ``head-tail`` when the runner is SIGKILLed mid-capture: the ring
was never put in order, and what the run leaves must still be read exactly.

Process-level: the real CLI, a child whose output wraps the ring many times over, SIGKILL once
the capture's own marks show every byte stored (polled, not slept on); then what the readers
(``processkit.salvage_capture``, ``report --capture-dir``) give back is compared byte for byte
with the stream the child wrote. Both pumps.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import processkit
from processkit import capture_layout

from conftest import LOADED_MACHINE_HEALTH, SAFETY_NET, read_events_tolerant, run_cli, start_cli, wait_for_event
from own_tmp import own_tmp  # noqa: F401
from streams import PY

CAP = 4096
# The child's stream: numbered lines, so a byte out of place is a different byte. Not a multiple
# of the ring, so the ring's oldest byte sits inside the file, not at its start.
LINES = 25_013
STREAM = b"".join(b"%07d\n" % n for n in range(LINES))
CHILD = (
    "import sys, time\n"
    "data = b''.join(b'%07d\\n' % n for n in range(int(sys.argv[1])))\n"
    "for at in range(0, len(data), 3000): sys.stdout.buffer.write(data[at : at + 3000]); sys.stdout.flush()\n"
    "time.sleep(60)\n"
)
EXPECTED = {
    "tail": [(len(STREAM) - CAP, len(STREAM))],
    "head-tail": [(0, CAP // 2), (len(STREAM) - CAP // 2, len(STREAM))],
}


def stored_everything(directory) -> dict | None:
    """The salvage once the marks say the whole stream went to the file, else None."""
    found = processkit.salvage_capture(str(directory))
    if found is None or found["stdout"].seen != len(STREAM) or found["stdout"].ranges[-1][1] != len(STREAM):
        return None
    return found


@pytest.mark.parametrize("keep", ["tail", "head-tail"])
def test_a_killed_runner_leaves_a_ring_the_readers_put_in_order(tmp_path, pump_backend, keep, own_tmp):
    try:
        killed_runner_read_back(tmp_path, keep)
    finally:  # the killed run's tree (its child sleeps on, in its group), this test's alone: no later sweep's
        pruned = run_cli("prune")
        assert pruned.returncode == 0, pruned.stderr


def killed_runner_read_back(tmp_path, keep: str) -> None:
    capture, jsonl = tmp_path / "capture", tmp_path / "run.jsonl"
    runner = start_cli(
        "run",
        "--jsonl",
        jsonl,
        "--capture-dir",
        capture,
        "--capture-keep",
        keep,
        "--capture-max-bytes",
        CAP,
        "--no-echo",
        "--",
        PY,
        "-c",
        CHILD,
        LINES,
    )
    try:
        wait_for_event(jsonl, "run_started")
        deadline = time.monotonic() + SAFETY_NET
        while (found := stored_everything(capture)) is None:
            assert time.monotonic() < deadline, processkit.salvage_capture(str(capture))
            assert runner.poll() is None, runner.communicate()
            time.sleep(0.01)
    finally:
        runner.kill()
        runner.communicate(timeout=SAFETY_NET)
    events = read_events_tolerant(jsonl)
    assert "output_captured" not in [event["event"] for event in events], "the runner never reached its end"
    run_id = events[0]["run_id"]

    record = json.loads((capture / capture_layout.NAME).read_text())
    assert (record["state"], record["run_id"], record["keep"], record["cap"]) == ("capturing", run_id, keep, CAP)
    found = processkit.salvage_capture(str(capture), run_id)
    stdout, stderr = found["stdout"], found["stderr"]
    assert list(stdout.ranges) == EXPECTED[keep]
    in_order = b"".join(STREAM[start:end] for start, end in EXPECTED[keep])
    assert stdout.read() == in_order
    assert stdout.read(100) == in_order[-100:]
    assert (capture / "stdout.log").read_bytes() != in_order, "the file itself is the raw ring"
    assert (stderr.ranges, stderr.read(), stderr.seen) == ((), b"", 0)
    assert processkit.salvage_capture(str(capture), "another-run") is None

    page = tmp_path / "page.html"
    proc = run_cli("report", jsonl, "--capture-dir", capture, "-o", page)
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert "put in stream order from the ring" in html
    shown = re.search(r'<pre class="tail" data-stream="stdout">(.*?)</pre>', html, re.S).group(1)
    assert shown.split("\n") == [f"{n:07d}" for n in range(LINES - 40, LINES)], "the last 40 lines, in order"


def test_a_record_whose_ring_was_being_put_in_order_claims_nothing(tmp_path):
    """The marks are retired before the ring is rotated in place: a run that ended normally
    leaves only its final record, and a retired live record is never applied."""
    capture = tmp_path / "capture"
    jsonl = tmp_path / "run.jsonl"
    proc = run_cli(
        "run", "--jsonl", jsonl, "--capture-dir", capture, "--capture-keep", "tail", "--capture-max-bytes", CAP,
        "--no-echo", "--", PY, "-c", CHILD.replace("time.sleep(60)", "pass"), LINES,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert not (capture / capture_layout.MARKS_NAME).exists()
    assert "state" not in json.loads((capture / capture_layout.NAME).read_text())
    assert processkit.salvage_capture(str(capture)) is None
    assert (capture / "stdout.log").read_bytes() == STREAM[-CAP:]

    live = capture_layout.start(str(capture), "run-x", "tail", CAP, 0)
    assert live is not None and processkit.salvage_capture(str(capture)) is not None
    live.retire()
    assert not (capture / capture_layout.MARKS_NAME).exists()
    assert processkit.salvage_capture(str(capture)) is None


class Killed(BaseException):
    """Stands for the SIGKILL: raised out of a write, past every handler."""


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, *LOADED_MACHINE_HEALTH]
)
@given(
    keep=st.sampled_from(["tail", "head-tail"]),
    cap=st.integers(2, 64),
    chunks=st.lists(st.integers(1, 150), min_size=1, max_size=12),
    writes_before_kill=st.integers(0, 60),
    bytes_of_last_write=st.integers(0, 150),
)
def test_a_kill_inside_any_write_leaves_marks_that_claim_only_right_bytes(
    tmp_path_factory, keep, cap, chunks, writes_before_kill, bytes_of_last_write
):
    """The Python pump's writer storing chunks into a real file and real marks, killed inside
    any of its writes (after part of the write's bytes went in): every byte the salvage claims
    is the stream's byte at that position, and it claims everything the ring certainly still
    holds (the stored bytes, less the oldest ones the chunk in flight may have overwritten)."""
    from processkit.engine import capture

    directory = tmp_path_factory.mktemp("ring")
    stream = bytes((n * 7 + n // 256) % 256 for n in range(sum(chunks)))
    targets = capture.open_targets(str(directory), cap, keep)
    capture.record_rings(targets, str(directory), "run-k")
    target = targets["stdout"]
    writer = capture.CaptureFile(target)
    real_pwrite, calls = os.pwrite, [0]

    def pwrite(fd, data, offset):
        if calls[0] == writes_before_kill:
            real_pwrite(fd, bytes(data[: min(bytes_of_last_write, len(data))]), offset)
            raise Killed
        calls[0] += 1
        return real_pwrite(fd, data, offset)

    before = 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "pwrite", pwrite)
        try:
            for size in chunks:
                before = writer.stored
                writer.write(memoryview(stream[writer.seen : writer.seen + size]))
            before = writer.stored
        except Killed:
            pass
    for opened in targets.values():
        os.close(opened.fd)
    found = processkit.salvage_capture(str(directory), "run-k")["stdout"]
    data = found.read()
    assert data == b"".join(stream[start:end] for start, end in found.ranges)
    head = target.head
    ring = cap - head
    certain_from = max(head, before - ring, writer.seen - ring) if ring else head
    for start, end in [(0, min(before, head)), (certain_from, before)]:
        if start < end:
            assert any(a <= start and end <= b for a, b in found.ranges), (found.ranges, start, end)


def test_a_ring_run_whose_child_never_starts_leaves_no_live_record(tmp_path):
    capture = tmp_path / "capture"
    proc = run_cli(
        "run", "--jsonl", tmp_path / "run.jsonl", "--capture-dir", capture, "--capture-keep", "tail",
        "--", "/nonexistent/program",
    )  # fmt: skip
    assert proc.returncode == 101, proc.stderr
    assert sorted(os.listdir(capture)) == ["stderr.log", "stdout.log"]


def test_a_link_planted_at_the_marks_is_neither_followed_nor_removed(tmp_path):
    capture, victim = tmp_path / "capture", tmp_path / "victim"
    capture.mkdir()
    victim.write_bytes(b"keep me\n")
    (capture / capture_layout.MARKS_NAME).symlink_to(victim)
    proc = run_cli(
        "run", "--jsonl", tmp_path / "run.jsonl", "--capture-dir", capture, "--capture-keep", "tail",
        "--capture-max-bytes", CAP, "--no-echo", "--", PY, "-c", CHILD.replace("time.sleep(60)", "pass"), LINES,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(b"\n") == 2 and b"could not keep the capture ring's marks" in proc.stderr
    assert b"stdout's capture was cut at --capture-max-bytes" in proc.stderr  # and the cut, said once
    assert victim.read_bytes() == b"keep me\n"
    assert (capture / capture_layout.MARKS_NAME).is_symlink()
    assert (capture / "stdout.log").read_bytes() == STREAM[-CAP:], "the capture itself is unaffected"
