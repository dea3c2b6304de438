"""Child programs whose whole-tree figures are known, shared by tests/test_accounting.py and
bench/accounting.py. Each takes one path argument (files ``<path>.<n>`` are its barrier)."""

from __future__ import annotations

HOLD_100_MIB = "block = bytearray(100 << 20)\n        block[::4096] = b'1' * len(block[::4096])"


def concurrent(count: int, work: str) -> str:
    """A root that forks ``count`` children, each doing ``work`` and then holding on until all
    have, and waits for them: ``count`` + 1 processes alive at once."""
    return f"""
import os, sys, time
ready = sys.argv[1]
pids = []
for n in range({count}):
    pid = os.fork()
    if pid == 0:
        {work}
        open(f"{{ready}}.{{n}}", "w").close()
        while not all(os.path.exists(f"{{ready}}.{{k}}") for k in range({count})):
            time.sleep(0.005)
        os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
"""


TWENTY_THREADS = """
import sys, threading
started = threading.Barrier(21)  # all twenty threads and the main one alive at once
threads = [threading.Thread(target=started.wait) for _ in range(20)]
for thread in threads:
    thread.start()
started.wait()
for thread in threads:
    thread.join()
"""  # one process, twenty-one tasks, no subprocess


def early_burners(seconds: float) -> str:
    """A middle process starts two burners of ``seconds`` CPU each and exits at once, so nobody in
    the tree reaps them; they exit before the root, which reads their pids from a pipe they hold
    and, at its end of file, waits until each is a zombie or gone: the end of file comes as an
    exiting process closes its files, before it has exited (on a loaded host the root could end
    first, and a burner was then read live, at clock-tick precision, not collected)."""
    return f"""
import os, time
read_end, write_end = os.pipe()
if os.fork() == 0:
    os.close(read_end)
    for n in range(2):
        if os.fork() == 0:
            os.write(write_end, b"%d\\n" % os.getpid())
            end = time.process_time() + {seconds}
            while time.process_time() < end:
                pass
            os._exit(0)
    os._exit(0)
os.close(write_end)
said = b""
while chunk := os.read(read_end, 64):  # end of file once every burner is exiting
    said += chunk
os.wait()
for pid in said.split():
    while True:
        try:
            with open(b"/proc/%s/stat" % pid, "rb") as stat:
                if stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    break
        except OSError:
            break  # collected
        time.sleep(0.001)
"""
