"""Many threads of one caller waiting on its runner service at once (issue 49): a reply wakes the
thread waiting for it, not every waiting thread; each call gets its own result whatever the
order the replies come in; and a waiting thread that leaves (its reply came, or it was
interrupted while it was the one reading the socket) hands the reading on, so the others still
get theirs."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading

import processkit

from fifo_ends import opened_for_writing

PY = sys.executable


def _switches(tid: int) -> int:
    """The voluntary context switches of thread ``tid`` of this process: one each time it slept
    and was woken."""
    with open(f"/proc/self/task/{tid}/status") as handle:
        for line in handle:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches line")


def _all_return(calls, count: int) -> None:
    """``calls(index)`` in ``count`` threads at once, each returned within two minutes."""
    threads = [threading.Thread(target=calls, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads), "a thread still waits: its reply was never read"


def test_a_reply_wakes_only_the_thread_waiting_for_it(tmp_path):
    """Seven threads wait on runs blocked on FIFOs while this thread makes 40 calls: the replies
    to those calls wake at most the one waiting thread that reads the socket, never all seven."""
    fifos = [tmp_path / f"f{index}" for index in range(7)]
    for fifo in fifos:
        os.mkfifo(fifo)
    tids: dict[int, int] = {}
    results: dict[int, processkit.RunResult] = {}

    def wait(index: int) -> None:
        tids[index] = threading.get_native_id()
        script = f'read line < "{fifos[index]}"; printf "%s" "$line"; exit {index + 3}'
        # The FIFOs are written once the 40 calls are done, however long a loaded host takes:
        # the timeout is only a safety net for a test that failed before writing them.
        results[index] = processkit.run(["sh", "-c", script], capture_output=True, timeout=900)

    processkit.run(["true"])  # the service is started before the threads
    threads = [threading.Thread(target=wait, args=(index,)) for index in range(7)]
    for thread in threads:
        thread.start()
    # Every run has begun once its FIFO is open: its thread waits.
    writers = [opened_for_writing(fifo, what="its run's open") for fifo in fifos]
    try:
        before = {index: _switches(tid) for index, tid in tids.items()}
        for call in range(40):
            assert processkit.run(["sh", "-c", f"exit {call % 5}"]).returncode == call % 5
        woken = sorted(_switches(tids[index]) - before[index] for index in range(7))
    finally:
        for index, fd in enumerate(writers):
            os.write(fd, f"line-{index}\n".encode())
            os.close(fd)
        for thread in threads:
            thread.join(300)
    assert all(n <= 8 for n in woken[:-1]), f"waiting threads woken per 40 replies: {woken}"
    assert {index: (r.returncode, r.stdout) for index, r in results.items()} == {
        index: (index + 3, f"line-{index}".encode()) for index in range(7)
    }


def test_eight_threads_each_get_their_own_result_as_the_replies_interleave():
    """8 threads x 25 calls whose outputs and codes all differ, each call's reply read by
    whichever thread reads the socket: every call gets its own bytes and its own code."""
    wrong: list[str] = []

    def calls(thread: int) -> None:
        for call in range(25):
            token, code = f"t{thread}-c{call}-" + "x" * (call * 37), (thread * 25 + call) % 120
            found = processkit.run(
                ["sh", "-c", 'printf "%s" "$0"; printf "%s" "$0" >&2; exit $1', token, str(code)], capture_output=True
            )
            if (found.returncode, found.stdout, found.stderr) != (code, token.encode(), token.encode()):
                wrong.append(f"{token}: {found.returncode} {found.stdout[:40]!r}")

    _all_return(calls, 8)
    assert wrong == []


def test_large_replies_from_many_threads_each_come_back_whole():
    """Outputs of 100 KiB to 900 KiB (replies spanning many reads of the socket, several in it at
    once) from 4 threads: each call gets exactly its own bytes."""
    wrong: list[str] = []

    def calls(thread: int) -> None:
        for call in range(4):
            token, size = f"t{thread}c{call}", (100 + 200 * call + 13 * thread) << 10
            found = processkit.run(["sh", "-c", 'yes "$0" | head -c "$1"', token, str(size)], capture_output=True)
            expected = ((token + "\n") * (size // len(token) + 1)).encode()[:size]
            if found.stdout != expected:
                wrong.append(f"{token}: {len(found.stdout or b'')} bytes of {size}")

    _all_return(calls, 4)
    assert wrong == []


CALLER = r"""
import os, signal, sys, threading, processkit
fifos = sys.argv[1:]
def seen(text):
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if handle.read() == text:
                    return True
        except OSError:
            pass
    return False
def reading(tid):
    # Whether thread tid waits in poll (wchan; else its syscall: x86_64's poll or ppoll,
    # aarch64's ppoll): in its call, the main thread so waits only on the socket.
    try:
        with open(f"/proc/self/task/{tid}/wchan") as handle:
            if handle.read().startswith("poll_schedule"):
                return True
        with open(f"/proc/self/task/{tid}/syscall") as handle:
            return handle.read().split()[0] in ("7", "271", "73")
    except OSError:
        return False
main = threading.get_native_id()
results = {}
def wait(index):
    # This thread's call goes once the main thread's child runs and the main thread reads the
    # socket (its call's reply is the only one it can wait for): it is then the reader.
    while not (seen(b"sleep\x003737.875\x00") and reading(main)):
        threading.Event().wait(0.005)
    script = f'read line < "{fifos[index]}"; printf "%s" "$line"; exit {index + 3}'
    results[index] = processkit.run(["sh", "-c", script], capture_output=True)
threads = [threading.Thread(target=wait, args=(index,)) for index in range(len(fifos))]
for thread in threads:
    thread.start()
try:
    processkit.run(["sleep", "3737.875"])  # the first to wait: the thread that reads the socket
except KeyboardInterrupt:
    print("interrupted", flush=True)
for thread in threads:
    thread.join()
print(sorted((index, r.returncode, r.stdout.decode()) for index, r in results.items()), flush=True)
"""


def _line(caller: subprocess.Popen, seconds: float = 120) -> bytes:
    """The caller's next line, or b"" if none came in ``seconds`` (a caller that hangs)."""
    assert caller.stdout is not None
    if not select.select([caller.stdout], [], [], seconds)[0]:
        return b""
    return caller.stdout.readline()


def test_a_call_interrupted_while_it_reads_for_others_hands_the_reading_on(tmp_path):
    """The main thread's call waits first (so it reads the socket for everyone); three threads'
    calls wait behind it. SIGINT ends the main thread's call; the three still get their own
    results, replied after it left."""
    fifos = [str(tmp_path / f"f{index}") for index in range(3)]
    for fifo in fifos:
        os.mkfifo(fifo)
    caller = subprocess.Popen([PY, "-c", CALLER, *fifos], stdout=subprocess.PIPE)
    writers: list[int] = []
    try:
        writers = [opened_for_writing(fifo, what="its run's open") for fifo in fifos]  # the three runs have begun
        caller.send_signal(signal.SIGINT)
        assert _line(caller) == b"interrupted\n"
        for index, fd in enumerate(writers):
            os.write(fd, f"line-{index}\n".encode())
            os.close(fd)
        writers = []
        assert _line(caller).decode().strip() == str([(index, index + 3, f"line-{index}") for index in range(3)])
        assert caller.wait(timeout=120) == 0
    finally:
        for fd in writers:
            os.close(fd)
        caller.kill()
        caller.wait()
