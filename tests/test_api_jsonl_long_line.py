"""A line of a call's ``jsonl=`` stream longer than PIPE_BUF, into a FIFO whose reader stalls: it
goes whole or not at all. The pipe held another writer's bytes, so the line's first write took
what fitted and its rest waited in the backlog; the reader took nothing more, the stream failed
as a stalled one does, and the reader was left with half a line. The line now waits for the
pipe to empty (the only room sure to take it whole) and goes in one write; a reader that keeps
reading gets it whole as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PY = sys.executable

CALLER = r"""
import fcntl, json, os, struct, sys, termios, threading, time, processkit
fifo, mode = sys.argv[1], sys.argv[2]
reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
filler = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
os.write(filler, b'{"filler":true}\n' * 2500)  # 40,000 bytes: the pipe (64 KiB) holds them
data = bytearray()
def read_all():
    os.set_blocking(reader, True)
    while chunk := os.read(reader, 65536):
        data.extend(chunk)
busy = mode == "busy"  # another writer keeps the pipe from emptying; the reader takes steadily
filled = threading.Event()
def read_slowly():  # never below 4096 bytes held: the pipe never empties, however late the filler
    while not filled.is_set():
        held = struct.unpack("i", fcntl.ioctl(reader, termios.FIONREAD, b"\0\0\0\0"))[0]
        if held > 4096:
            data.extend(os.read(reader, min(held - 4096, 8192)))
        time.sleep(0.001)
def fill():  # paced: a filler refilling at once kept the pipe full at nearly every look, so the
    # runner saw its reader take nothing and (on a loaded host) failed the stream as stalled
    os.set_blocking(filler, True)
    while busy:
        os.write(filler, b'{"filler":true}\n' * 256)  # 4096 bytes, each write atomic
        time.sleep(0.002)
if mode == "reading":
    taking = threading.Thread(target=read_all)
    taking.start()
if busy:
    threads = [threading.Thread(target=read_slowly), threading.Thread(target=fill)]
    for thread in threads:
        thread.start()
# run_started names the argv (argv_raw): a line of about 40,000 bytes, more than the pipe has room for
result = processkit.run(["true", "x" * 40000], jsonl=fifo, snapshot_interval="1h", argv_raw=True)
if busy:
    busy = False
    threads[1].join()  # the filler first: the reader makes its last write's room
    filled.set()
    threads[0].join()
os.close(filler)  # held open until now: the reader's end of file is the run's
if mode == "reading":
    taking.join()
else:  # the reader took nothing while the run went on: what reached the pipe, read now
    read_all()
print(json.dumps({"code": result.returncode, "data": bytes(data).decode()}))
"""


def _lines(tmp_path, mode: str, timeout: float = 60) -> tuple[int, str]:
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    done = subprocess.run([PY, "-c", CALLER, str(fifo), mode], capture_output=True, timeout=timeout)
    assert done.returncode == 0, done.stderr.decode()
    found = json.loads(done.stdout)
    return found["code"], found["data"]


def test_a_long_line_behind_a_stalled_reader_is_never_left_half_written(tmp_path):
    code, data = _lines(tmp_path, "stalled")
    assert code == 0
    assert data.endswith("\n"), data[-80:]
    for line in data.splitlines():
        json.loads(line)  # no half line


def test_a_long_line_goes_whole_to_a_reader_that_reads(tmp_path):
    code, data = _lines(tmp_path, "reading")
    assert code == 0
    events = [json.loads(line) for line in data.splitlines()]
    started = [e for e in events if e.get("event") == "run_started"]
    assert len(started) == 1 and started[0]["command"]["argv"][1] == "x" * 40000
    assert events[-1]["event"] == "runner_exit"


def test_a_long_line_into_a_pipe_kept_busy_goes_once_it_waited_its_bound(tmp_path):
    """Another writer kept the pipe from ever emptying while the reader read steadily (so no
    stall): the long line waited for an empty pipe for good, and the call never returned. Past
    its bound it goes as the pipe takes it, as before the wait (whole no longer promised)."""
    code, data = _lines(tmp_path, "busy")
    assert code == 0
    assert '"event":"runner_exit"' in data.replace(" ", "")
