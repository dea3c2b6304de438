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
    the tree reaps them; they exit before the root, which waits for the end of a pipe they hold."""
    return f"""
import os, time
read_end, write_end = os.pipe()
if os.fork() == 0:
    os.close(read_end)
    for n in range(2):
        if os.fork() == 0:
            end = time.process_time() + {seconds}
            while time.process_time() < end:
                pass
            os._exit(0)
    os._exit(0)
os.close(write_end)
os.read(read_end, 1)  # end of file once every burner has exited
os.wait()
"""
