"""The scratch run's two private things: the harmless child it contains, and the fresh 0700
directory holding its stream, its output and, when a phase fails, the kept report."""

from __future__ import annotations

import os
import tempfile
import time

from ..errors import Failure, Kind


def be_scratch_child(duration_ms: int) -> int:
    """The whole contract of the scratch child: the container around it is under test, so it
    sleeps and exits 0, and does nothing else."""
    time.sleep(duration_ms / 1000)
    return 0


def scratch_dir() -> str:
    """A new 0700 directory: created, never adopted (the temp dir is shared with other users)."""
    for _ in range(16):
        path = os.path.join(tempfile.gettempdir(), f"processkit-cli-doctor-{os.getpid()}-{time.time_ns():x}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot create the doctor scratch directory {path}: {exc.strerror}") from None
        return path
    raise Failure(Kind.SETUP, f"cannot create a fresh doctor scratch directory in {tempfile.gettempdir()}")
