"""The event stream (JSONL): its writer, types, reader, follower and renderer.

``SCHEMA_VERSION`` is the one home of the stream's schema version: the envelope (``events.base``)
writes it, and ``registry.stream_outcome`` (``wait``) reads a stream back only where its events
carry it. It lives in the package's own module, which loads no event class, so a reader that
needs the version alone (``wait``) pays for no class, and a run, which loads the package
anyway, for nothing more.
"""

SCHEMA_VERSION = 1
