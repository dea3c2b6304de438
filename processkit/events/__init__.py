"""The event stream (JSONL): its writer, types, reader, follower and renderer.

``SCHEMA_VERSION`` is the one home of the stream's schema version: the envelope (``events.base``)
writes it, and ``registry.stream_outcome`` (``wait``) reads a stream back only where its events
carry it. It lives in the package's own module, which loads no event class, so a reader that
needs the version alone (``wait``) pays for no class, and a run, which loads the package
anyway, for nothing more. ``names_run`` is here for the same reason: ``wait`` and the reads by
run id (``events.follow``) judge whose a stream is by it.
"""

SCHEMA_VERSION = 1


def is_v1(event: dict) -> bool:
    version = event.get("schema_version")
    return type(version) is int and version == SCHEMA_VERSION


def names_run(event: dict, run_id: str) -> bool | None:
    """Whether a v1 ``run_started`` names ``run_id``; None for any other event. A stream's first
    ``run_started`` says whose it is: a path names a file, not a run (a ``--jsonl`` reused by a
    later run, a link on the way to it changed), so a stream whose first names another run is
    that run's, never ``run_id``'s."""
    if event.get("event") != "run_started" or not is_v1(event):
        return None
    return event.get("run_id") == run_id
