"""A call whose ``jsonl=`` is a FIFO its reader does not read never holds up the other calls of
the shared runner service: the stream's lines the pipe cannot take wait in its backlog and go,
in order, as the reader takes them, while the service's loop carries the other runs. Before,
the write waited in the loop for up to 2 s and then failed the stream (its one warning), and
every other call waited with it. The check is by order, not time: the call beside it returns
before anything of the FIFO is read, and the stalled run's stream then arrives whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PY = sys.executable

CALLER = r"""
import json, os, sys, threading, time, processkit
fifo, here = sys.argv[1], sys.argv[2]
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
    result = processkit.run(["sh", "-c", waits, here], jsonl=fifo, snapshot_interval="1h")
    seen["stalled"] = result.returncode
first = threading.Thread(target=stalled)
first.start()
while not os.path.exists(os.path.join(here, "started")):
    time.sleep(0.02)
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


def test_a_stalled_jsonl_fifo_holds_up_no_other_call_and_loses_nothing(tmp_path):
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    done = subprocess.run([PY, "-c", CALLER, str(fifo), str(tmp_path)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    seen = json.loads(done.stdout)
    assert seen["beside"] == 0 and seen["stalled"] == 0
    events = seen["events"]
    assert events and events[0] == "run_started" and events[-1] == "runner_exit", events


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
