"""The rendezvous the reference's own test suite holds ``run --detach``'s launcher at, to change
the stream between the copy's end and the launcher's last look at it (docs/run.md §1.4).

With ``PROCESSKIT_CLI_TEST_DETACH_FINAL_READ_GATE`` naming a directory, the launcher takes no
proof of the start while its copy runs; once the copy has ended it writes ``before-final-read``
there, waits up to the handshake's bound (counted from there, as the reference counts it) for
``allow-final-read``, reads the stream's first record, and writes what that read cost
(``examined fetched``, in bytes) to ``final-read-counts``. The reference compiles this only into
its debug builds; this build honours it always, so that suite can be run against an installed
build (docs/differences.md). Nothing but a test sets the variable. Its failures are the
reference's words."""

from __future__ import annotations

import os
import time

from ..errors import Failure, Kind, setup_failure
from ..safepath import open_for_writing

VARIABLE = "PROCESSKIT_CLI_TEST_DETACH_FINAL_READ_GATE"
POLL_SECONDS = 0.02


class Gate:
    def __init__(self, directory: str):
        self._dir = directory

    @classmethod
    def from_env(cls) -> Gate | None:
        directory = os.environ.get(VARIABLE)
        return cls(directory) if directory else None

    def hold(self, run_id: str, seconds: float) -> None:
        """Say the launcher is at the gate, then wait for the release (a Failure past ``seconds``)."""
        self._write(
            "before-final-read",
            b"ready",
            f"could not publish the internal final-read test rendezvous for run `{run_id}`",
        )
        release = os.path.join(self._dir, "allow-final-read")
        deadline = time.monotonic() + seconds
        while not os.path.exists(release):
            if time.monotonic() >= deadline:
                raise Failure(
                    Kind.SETUP,
                    f"the internal final-read test rendezvous for run `{run_id}` was not released "
                    f"within {seconds:g}s",  # whole seconds: the reference's form
                )
            time.sleep(POLL_SECONDS)

    def record(self, run_id: str, examined: int, fetched: int) -> None:
        self._write(
            "final-read-counts",
            f"{examined} {fetched}\n".encode(),
            f"could not record the internal final-read byte counts for run `{run_id}`",
        )

    def _write(self, name: str, data: bytes, failed: str) -> None:
        try:
            fd = open_for_writing(os.path.join(self._dir, name))
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise setup_failure(failed, exc) from None
