"""The Python API: ``run``, ``start``, ``attach``, ``runs`` and their results, every run of a
process carried by that process's runner service (``shared``, ``service``; see ``launch`` for what that
means for the caller)."""

from .control import ControlError
from .handle import RunHandle
from .opened import attach, start
from .listing import RunInfo, runs
from .launch import run, run_async
from .options import keywords
from .shortcuts import check_call, check_output
from .result import (
    CaptureInfo,
    CaptureTruncated,
    CaptureWriteFailed,
    EchoLost,
    EventsLost,
    LeftRunning,
    RunError,
    RunResult,
)

__all__ = [
    "CaptureInfo",
    "CaptureTruncated",
    "CaptureWriteFailed",
    "ControlError",
    "EchoLost",
    "EventsLost",
    "LeftRunning",
    "RunError",
    "RunHandle",
    "RunInfo",
    "RunResult",
    "attach",
    "check_call",
    "check_output",
    "keywords",
    "run",
    "run_async",
    "runs",
    "start",
]
