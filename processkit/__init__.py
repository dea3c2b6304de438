"""processkit: run one command inside a containment boundary, exactly and boundedly.

``processkit.run``, ``start``, ``attach``, ``runs`` and the result types live in
``processkit.api`` and are loaded on first use (``batch`` in ``processkit.batching``, ``bench`` in
``processkit.api.bench``): the CLI imports this package on every run and
must not pay for the API. ``__version__`` is read from ``processkit.version`` on first use too:
the launcher imports this package before its finder is in place, so a module imported here is
found the interpreter's slow way on every run (the CLI's own modules import ``version``
themselves, from the run's bundle).
"""

_API = frozenset(
    (
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
    )
)


def __getattr__(name: str):
    if name in _API:  # first: ``processkit.run`` is read at every call
        api = globals().get("api")  # the subpackage, bound here by its first import
        if api is None:
            from . import api
        return getattr(api, name)
    if name == "__version__":
        from .version import __version__

        return __version__
    if name == "batch":  # the batch engine, in a process the runner service starts (processkit.batching)
        from .batching.caller import batch

        return batch
    if name in ("BatchError", "BatchWarning"):
        from .batching import caller

        return getattr(caller, name)
    if name == "bench":  # the benchmark API, loaded on first use too
        from .api.bench import bench

        return bench
    if name == "salvage_capture":  # a killed ring run's capture, read in stream order (events.kept)
        from .events.kept import salvage

        return salvage
    raise AttributeError(f"module 'processkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(
        set(globals()) | _API | {"__version__", "batch", "BatchError", "BatchWarning", "bench", "salvage_capture"}
    )
