"""What one of ``wait``'s retries costs while a run's ``runner_exit`` is on its way
(``registry.stream_outcome.Stream.read``): the retries, every 10 ms for up to 3 s, read the
stream of a run that has ended and whose last line has not arrived yet.

Two ways, alternating in one run, the median of each: ``kept``, the one ``Stream`` a wait keeps
across its retries (the owner decided once per file, only the new lines scanned); ``fresh``, a
new ``Stream`` per read, which does what every retry did before (the head judged again, the
tail's 64 KiB scanned whole). The stream is this run's ``run_started`` then snapshot lines, no
``runner_exit``:

    python3 bench/wait_retry.py --kib 2 256
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from processkit.registry.stream_outcome import Stream


def line(event: str, **fields) -> bytes:
    return (
        json.dumps({"schema_version": 1, "time": "2026-01-01T00:00:00.000Z", "event": event, **fields}) + "\n"
    ).encode()


def per_read(read, reads: int) -> float:
    started = time.perf_counter()
    for _ in range(reads):
        read()
    return (time.perf_counter() - started) / reads * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kib", type=int, nargs="+", default=[2, 256], help="stream sizes (KiB)")
    parser.add_argument("--reads", type=int, default=200, help="reads per round")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    snapshot = line("members_snapshot", members=[{"pid": 1, "start": 2}] * 3)
    with tempfile.TemporaryDirectory() as directory:
        for kib in args.kib:
            path = os.path.join(directory, f"{kib}.jsonl")
            with open(path, "wb") as handle:
                handle.write(line("run_started", run_id="r", root_pid=1) + snapshot * (kib * 1024 // len(snapshot)))
            kept = Stream(path, "r")
            assert kept.read() is None
            figures: dict[str, list[float]] = {"kept": [], "fresh": []}
            for _ in range(args.rounds):
                figures["kept"].append(per_read(kept.read, args.reads))
                figures["fresh"].append(per_read(lambda at=path: Stream(at, "r").read(), args.reads))
            medians = {name: statistics.median(values) for name, values in figures.items()}
            print(
                f"{kib} KiB: kept {medians['kept']:.1f} us/read, fresh {medians['fresh']:.1f} us/read, "
                f"fresh/kept {medians['fresh'] / medians['kept']:.1f}x"
            )


if __name__ == "__main__":
    main()
