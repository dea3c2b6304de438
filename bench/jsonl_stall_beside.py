"""How long a `processkit.run(["true"])` takes while another call of the same process has a
`jsonl=` FIFO whose reader stopped reading (its pipe full): the runner service's one loop carries
both. Prints the median of ``ROUNDS`` rounds, in seconds.

    python3 bench/jsonl_stall_beside.py
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time

import processkit

ROUNDS = 3


def one_round() -> float:
    place = tempfile.mkdtemp()
    fifo = os.path.join(place, "events")
    os.mkfifo(fifo)
    idle_reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    stuffing = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    while True:  # the pipe filled: the stream's first line cannot go
        try:
            os.write(stuffing, bytes(4096))
        except BlockingIOError:
            break
    os.close(stuffing)
    stalled = threading.Thread(target=processkit.run, args=(["sleep", "3"],), kwargs={"jsonl": fifo})
    stalled.start()
    time.sleep(0.3)  # its first event is waiting on the full pipe by now
    began = time.monotonic()
    processkit.run(["true"])
    took = time.monotonic() - began
    os.close(idle_reader)  # the stalled stream fails at once (its reader is gone)
    stalled.join()
    os.unlink(fifo)
    os.rmdir(place)
    return took


def main() -> None:
    processkit.run(["true"])  # the service started outside the rounds
    print(f"{statistics.median(one_round() for _ in range(ROUNDS)):.3f}")


if __name__ == "__main__":
    main()
