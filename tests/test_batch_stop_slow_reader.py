"""``batch --show-output`` stopped while its stdout reader is slow but never stalls: every block
still reaches it whole. The stop used to drop the rest of stdout at once whenever its reader was
behind: the last ``==> X`` block was cut mid-way (35 to 68 of its 300 lines), exit 107, and
stderr said nothing. Now the stop waits for such a reader as a Dask batch's lines do
(``writeall.write_till_stopped``'s rule: every byte while the reader never goes 2 s without
taking one); one that stalls after the stop loses the rest, said in one line on stderr.
Process-level: the real CLI, real children, a real pipe read 1 KB every 20 ms; the stop is sent
once the summary records the jobs that end, never after a fixed sleep."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from conftest import SAFETY_NET
from test_batch import write_manifest
from test_batch_stalled_reader import batch_into_pipe

CANCELLED = 107
LINES = 300
PRINT = f"import sys\nfor n in range({LINES}): print(str(n).rjust(199, 'x'))\nsys.stdout.flush()\n"
JOBS = [{"id": name, "args": ["python3", "-c", PRINT]} for name in ("a", "b", "c")]
JOBS.append({"id": "d", "args": ["python3", "-c", PRINT + "import time; time.sleep(60)"]})


def _recorded(path, count: int, proc) -> None:
    """Until the summary has ``count`` lines (fails after SAFETY_NET seconds)."""
    deadline = time.monotonic() + SAFETY_NET
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and sum(text.endswith("}") for text in path.read_text().splitlines()) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{count} jobs not recorded")


def _slow_reader(fd: int, taken: bytearray, stop_at: threading.Event) -> None:
    """1 KB every 20 ms until the end, or until ``stop_at`` is set (then nothing more: a stall)."""
    while not stop_at.is_set():
        piece = os.read(fd, 1024)
        if not piece:
            return
        taken += piece
        time.sleep(0.02)


@pytest.mark.parametrize("reader", ["slow", "stalls-after-the-stop"])
def test_a_stopped_batch_keeps_stdout_for_a_slow_reader(tmp_path, reader):
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", JOBS)
    read_end, write_end = os.pipe()
    taken = bytearray()
    stall = threading.Event()
    proc = batch_into_pipe(write_end, tmp_path / "stderr", "-j", "4", "--out", str(out), manifest, cwd=tmp_path)
    thread = threading.Thread(target=_slow_reader, args=(read_end, taken, stall), daemon=True)
    thread.start()
    try:
        _recorded(out / "summary.jsonl", 3, proc)  # a, b and c ended; d sleeps; stdout far behind
        if reader != "slow":
            stall.set()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=SAFETY_NET) == CANCELLED
        thread.join(timeout=SAFETY_NET)
        stderr = (tmp_path / "stderr").read_text()
        dropped = [line for line in stderr.splitlines() if "the rest of its stdout is dropped" in line]
        if reader != "slow":
            assert dropped == [
                "processkit-cli: warning: batch: its stdout's reader took nothing for 2s after the stop:"
                " the rest of its stdout is dropped"
            ], stderr
            return
        assert dropped == [], stderr
        blocks = bytes(taken).decode().split("==> ")[1:]
        assert sorted(block.split(" ", 1)[0] for block in blocks) == ["a", "b", "c", "d"], [b[:40] for b in blocks]
        for block in blocks:
            lines = block.splitlines()[1:]
            assert len(lines) == LINES, (lines[:1], len(lines))
            assert lines[-1] == str(LINES - 1).rjust(199, "x")
    finally:
        stall.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        thread.join(timeout=SAFETY_NET)
        os.close(read_end)
