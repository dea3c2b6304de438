"""processkit: run one command inside a containment boundary, exactly and boundedly.

``processkit.run``, ``start``, ``attach``, ``runs`` and the result types live in
``processkit.api`` and are loaded on first use (``batch`` in ``processkit.batching``, ``bench`` in
``processkit.api.bench``): the CLI imports this package on every run and
must not pay for the API.
"""

from .version import __version__  # noqa: F401 - the package's public version

_API = frozenset(
    (
        "CaptureInfo",
        "CaptureTruncated",
        "ControlError",
        "RunError",
        "RunHandle",
        "RunInfo",
        "RunResult",
        "attach",
        "keywords",
        "run",
        "run_async",
        "runs",
        "start",
    )
)


def __getattr__(name: str):
    if name == "batch":  # the batch engine, in a process the runner service starts (processkit.batching)
        from .batching.caller import batch

        return batch
    if name == "BatchError":
        from .batching.caller import BatchError

        return BatchError
    if name == "bench":  # the benchmark API, loaded on first use too
        from .api.bench import bench

        return bench
    if name == "salvage_capture":  # a killed ring run's capture, read in stream order (events.kept)
        from .events.kept import salvage

        return salvage
    if name in _API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'processkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _API | {"batch", "BatchError", "bench", "salvage_capture"})
