"""The API service's own instructions per ``processkit.run(["true"])`` (issue 49): the service
run under ``valgrind --tool=callgrind``, once for ``--warm`` calls and once for ``--warm`` plus
``-n``, the difference divided by ``-n`` (its start-up and its first calls' imports cancel out).
Instruction counts hold where a loaded machine's times do not: they say a cut's direction.

The runs are spawned through the Python path (``PROCESSKIT_SPAWN=python``: valgrind does not run
the native spawn's ``clone3``); the children are not traced. The count moves by some ±20 k a
call from one service to the next (the memory groups' retries, the collector), so compare
several services of each tree, alternating.

    python3 bench/api_service_instructions.py -n 600
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shlex
import sys
import tempfile
import time

import processkit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_modules import service, shared  # noqa: E402

TOTAL = re.compile(r"^(?:totals|summary): (\d+)", re.M)


def instructions(calls: int, directory: str) -> int:
    """The instructions a service traced from its start to its end spent over ``calls`` calls."""
    plain = service.service_command
    out = os.path.join(directory, f"callgrind.{calls}.%p")
    wrapper = f'PROCESSKIT_SPAWN=python exec valgrind --tool=callgrind --callgrind-out-file={shlex.quote(out)} "$@"'
    service.service_command = lambda fd, caller: ["sh", "-c", wrapper, "sh", *plain(fd, caller)]  # type: ignore[assignment]
    shared._connection = None
    # A traced interpreter's start on a loaded host takes longer than a service is given to say
    # hello (``HELLO_SECONDS``, which kills it): given ten minutes here (a tree without the bound too).
    hello = getattr(service, "HELLO_SECONDS", None)
    service.HELLO_SECONDS = 600.0  # type: ignore[attr-defined]
    try:
        connection = shared.connection()
        for _ in range(calls):
            processkit.run(["true"])
        connection.close()  # the service sees its caller's end of file, ends, and writes its counts
    finally:
        service.service_command = plain  # type: ignore[assignment]
        shared._connection = None
        if hello is not None:
            service.HELLO_SECONDS = hello  # type: ignore[attr-defined]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        for path in glob.glob(os.path.join(directory, f"callgrind.{calls}.*")):
            with open(path) as handle:
                found = TOTAL.search(handle.read())
            if found:
                os.remove(path)
                return int(found.group(1))
        time.sleep(0.5)
    raise SystemExit("the traced service wrote no counts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=600, help="calls measured (default 600)")
    parser.add_argument("--warm", type=int, default=40, help="calls the measure starts after (default 40)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="api-instructions-") as directory:
        before = instructions(options.warm, directory)
        after = instructions(options.warm + options.n, directory)
    print(f"the service's instructions per run(['true']): {(after - before) / options.n:,.0f}")


if __name__ == "__main__":
    main()
