"""A call whose ``jsonl=`` is a FIFO its reader does not read never holds up the other calls of
the shared runner service: the stream's lines the pipe cannot take wait in its backlog and go,
in order, as soon as the reader makes room, while the service's loop carries the other runs. Before,
the write waited in the loop for up to 2 s and then failed the stream (its one warning), and
every other call waited with it. The check is by order, not time: the call beside it returns
before anything of the FIFO is read, and the stalled run's stream then arrives whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from conftest import SAFETY_NET

PY = sys.executable

# The prelude of each caller: a FIFO its reader has filled and not read, and a call on it whose
# child waits for "go" (its run's first events wait in the stream's backlog once it "started").
FULL_FIFO = r"""
import json, os, sys, threading, time, processkit
fifo, here, extra = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader that takes nothing for now
filler = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
junk = 0
try:
    while True:
        junk += os.write(filler, b"\n" * 4096)
except BlockingIOError:
    pass
os.close(filler)
seen = {}
def stalled():
    waits = 'touch "$0/started"; while [ ! -e "$0/go" ]; do sleep 0.05; done'
    result = processkit.run(["sh", "-c", waits, here], jsonl=fifo, snapshot_interval="1h", **extra)
    seen["stalled"] = result.returncode
first = threading.Thread(target=stalled)
first.start()
while not os.path.exists(os.path.join(here, "started")):
    time.sleep(0.02)
"""

CALLER = (
    FULL_FIFO
    + r"""
seen["beside"] = processkit.run(["true"]).returncode  # the FIFO untouched all along
data = bytearray()
def read_all():
    os.set_blocking(reader, True)
    while chunk := os.read(reader, 65536):
        data.extend(chunk)
taking = threading.Thread(target=read_all)
taking.start()
while len(data) < junk:  # the reader takes the filler first, then the run may end
    time.sleep(0.02)
open(os.path.join(here, "go"), "w").close()
first.join()
taking.join()
seen["events"] = [json.loads(line)["event"] for line in bytes(data).split(b"\n") if line.strip()]
print(json.dumps(seen))
"""
)

# The reader waits for run_started before it lets the child go: the run's only event until the
# child ends (no snapshots). Before, nothing watched the pipe for room, so it reached the reader
# only once the call's timeout ended the run (review of attack55b).
WAITS_FOR_STARTED = (
    FULL_FIFO
    + r"""
os.set_blocking(reader, True)
data = bytearray()
while b'"run_started"' not in data:  # the filler first, then the run's first line
    chunk = os.read(reader, 65536)
    if not chunk:
        break
    data += chunk
open(os.path.join(here, "go"), "w").close()
first.join()
while chunk := os.read(reader, 65536):
    data += chunk
seen["events"] = [json.loads(line)["event"] for line in bytes(data).split(b"\n") if line.strip()]
print(json.dumps(seen))
"""
)


def _carry(script: str, tmp_path, **extra) -> dict:
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    done = subprocess.run(
        [PY, "-c", script, str(fifo), str(tmp_path), json.dumps(extra)], capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return json.loads(done.stdout)


def test_a_stalled_jsonl_fifo_holds_up_no_other_call_and_loses_nothing(tmp_path):
    seen = _carry(CALLER, tmp_path)
    assert seen["beside"] == 0 and seen["stalled"] == 0
    events = seen["events"]
    assert events and events[0] == "run_started" and events[-1] == "runner_exit", events


def test_a_backlogged_line_reaches_a_reader_that_catches_up_while_the_run_waits(tmp_path):
    seen = _carry(WAITS_FOR_STARTED, tmp_path, timeout=SAFETY_NET)
    assert seen["stalled"] == 0, "run_started reached its reader only when the call's timeout ended the run"
    assert seen["events"][0] == "run_started" and seen["events"][-1] == "runner_exit", seen["events"]


NEVER_READ = r"""
import json, os, sys, processkit
fifo = sys.argv[1]
reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # never read while the call runs
filler = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
try:
    while True:
        os.write(filler, b"\n" * 4096)
except BlockingIOError:
    pass
os.close(filler)
code = processkit.run(["true"], jsonl=fifo).returncode
after = processkit.run(["true"]).returncode
print(json.dumps([code, after]))
"""


def test_a_jsonl_reader_that_never_reads_fails_its_stream_and_the_call_returns(tmp_path):
    """The backlog's stall rule is the CLI's: nothing taken for 2 s fails the stream (its one
    warning), and the run, its code and the service go on."""
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    done = subprocess.run([PY, "-c", NEVER_READ, str(fifo)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert json.loads(done.stdout) == [0, 0]


def _pipe_behind(tmp_path):
    """A FIFO with nothing read yet, and a deferred stream on it (a pipe of this process's named
    as ``/proc/self/fd/N`` is refused: a descriptor no caller passed)."""
    from processkit.events.emitter import Emitter
    from processkit.loop import Loop

    fifo = tmp_path / "behind.fifo"
    os.mkfifo(fifo)
    read_end = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the stream's open finds one
    os.set_blocking(read_end, True)
    return read_end, Emitter(str(fifo), defer=Loop())


def _lines(data: bytes) -> list[int]:
    """The child codes of the whole lines in ``data``, in order."""
    return [json.loads(line)["child_code"] for line in data.split(b"\n")[:-1]]


def test_a_deferred_stream_goes_whole_and_in_order_as_its_reader_takes_it(tmp_path):
    from processkit.events.types import RunnerExit

    read_end, emitter = _pipe_behind(tmp_path)
    for number in range(2000):  # far more than the pipe holds: the rest waits in the backlog
        emitter.emit(RunnerExit(code=0, source="child_exit", child_code=number))
    assert emitter.writing and not emitter.drained()
    data = bytearray()
    os.set_blocking(read_end, False)
    while True:
        try:
            data += os.read(read_end, 1 << 16)
        except BlockingIOError:
            if emitter.drained():
                break
    emitter.close()
    data += os.read(read_end, 1 << 20)
    os.close(read_end)
    assert emitter.failure is None
    assert _lines(bytes(data)) == list(range(2000))


def test_a_deferred_stream_past_its_backlog_bound_fails_keeping_its_beginning_in_order(tmp_path):
    from processkit.events.backlog import BACKLOG_MOST
    from processkit.events.types import RunnerExit

    read_end, emitter = _pipe_behind(tmp_path)
    emitted = 0
    while emitter.writing:  # the reader takes nothing: memory stays bounded
        emitter.emit(RunnerExit(code=0, source="child_exit", child_code=emitted))
        emitted += 1
        assert emitted < 4 * BACKLOG_MOST // 50, "the backlog grew past its bound"
    assert emitter.failure == f"could not write a JSONL event: its reader fell more than {BACKLOG_MOST} bytes behind"
    emitter.close()
    with os.fdopen(read_end, "rb") as reader:
        kept = _lines(reader.read())
    assert kept == list(range(len(kept))) and 0 < len(kept) < emitted, "a prefix, in order, nothing from the middle"
