"""``events`` without ``--follow`` reads a stream as it is: every line to the file's current end,
then it ends (``events.follow``: without ``writer_gone`` nothing is followed). Since the one
follower it waited on the file's end until the file had been still for the follow's settle
time (0.5 s; for a registered runner unregistering just before its last line, which only a
follow waits for): every ``events --file`` of an ended run took half a second more, and one of a
file still growing never ended while it grew."""

from __future__ import annotations

import subprocess
import sys

from conftest import SAFETY_NET, start_cli

LINE = b'{"schema_version":1,"event":"run_started","run_id":"grows","labels":{},"root_pid":1}\n'
# Appends a line every 10 ms, for ever: the file is never still for the settle time.
GROWING = f"import sys, time\nwith open(sys.argv[1], 'ab', buffering=0) as f:\n    while True:\n        f.write({LINE!r})\n        time.sleep(0.01)\n"


def test_a_file_still_growing_is_read_to_its_current_end_and_the_read_ends(tmp_path):
    stream = tmp_path / "stream.jsonl"
    stream.write_bytes(LINE)
    writer = subprocess.Popen([sys.executable, "-c", GROWING, str(stream)])
    reader = start_cli("events", "--json", "--file", stream)
    try:
        try:
            out, err = reader.communicate(timeout=SAFETY_NET)
        except subprocess.TimeoutExpired:
            raise AssertionError("events --file (no --follow) still reads a growing file") from None
    finally:
        for process in (reader, writer):
            if process.poll() is None:
                process.kill()
            process.wait()
    assert reader.returncode == 0, err
    # The file's lines as they were at its end: the last one may be a write caught half done,
    # which --json passes to stderr as a line's notice (not JSON), the one notice there can be.
    assert err == b"" or (err.count(b"\n") == 1 and b"not valid JSON" in err), err
    assert out.startswith(LINE) and all(LINE.startswith(line) for line in out.splitlines()), out
