"""A starting runner service's hello (``api.service.Connection``), awaited within a bound."""

from __future__ import annotations


def awaited(connection, seconds: float) -> tuple:
    """The hello of ``connection``'s starting service, awaited ``seconds`` at most: one stuck
    before it (its start blocked) is killed, and the hello made is that of a service that could
    not start, saying so. An interruption as it is awaited (Ctrl-C) kills it too, and collects it
    (up to ``COLLECT_SECONDS``) before it goes on: it was left to end at its socket's close, a
    zombie until a later ``Popen`` of the caller's collected it."""
    try:
        hello = connection.take(0, seconds)
    except BaseException:
        connection.process.kill()  # nothing was asked of it yet
        connection.retire()
        raise
    if hello is None:
        connection.process.kill()
        blocked = f"did not say hello within {seconds:g} s of its start (its start blocked): it was killed"
        hello = (None, 0, None, None, {"failure": f"the runner service (pid {connection.process.pid}) {blocked}"})
    return hello
