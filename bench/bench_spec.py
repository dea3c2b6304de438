"""What a benchmark run's RunSpec costs to make: through the run grammar's builder each time
(``grammar.run.build``), as a copy of the session's built spec (``RunSpec.replace``, what
``benchmark/driver.run_spec`` does), and by hand (the driver before). The three alternate within
each round, so a load that comes and goes falls on each alike; the medians of the rounds are
reported.

    python3 bench/bench_spec.py [--rounds 31] [--calls 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from processkit.grammar.run import build
from processkit.grammar import FLAGS
from processkit.spec import EnvPlan, RunSpec, StdinMode

GIVEN = {"jsonl": os.devnull, "grace": 0, "env_clear": True, "no_echo": True, "timeout": "1500ms"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    env = EnvPlan(clear=True, assignments=tuple(os.environ.items()))
    session = build((), GIVEN, FLAGS)
    ways = {
        "grammar.run.build per run": lambda: build(("true",), GIVEN, FLAGS),
        "session spec copied (replace)": lambda: session.replace(
            argv=("true",), run_id="r", echo=False, output_fd=None, stdin=StdinMode.NULL, stdin_file=None, env=env
        ),
        "RunSpec by hand": lambda: RunSpec(
            argv=("true",),
            jsonl=os.devnull,
            run_id="r",
            run_id_given=False,
            timeout_ms=1500,
            grace_ms=0,
            echo=False,
            output_fd=None,
            stdin=StdinMode.NULL,
            stdin_file=None,
            env=env,
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, make in ways.items():
            start = time.perf_counter()
            for _ in range(args.calls):
                make()
            times[name].append((time.perf_counter() - start) / args.calls * 1e6)
    for name, found in times.items():
        print(f"{name:32s} median {statistics.median(found):7.2f} us  (min {min(found):.2f})")


if __name__ == "__main__":
    main()
