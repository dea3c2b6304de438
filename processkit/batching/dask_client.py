"""The client's side of ``--dask-scheduler`` as Dask sees it: its connection to the scheduler
(``connect``), an exception of Dask's said on one line (``said``), and Dask's own log kept quiet
while the client tells the workers, waits out a stop and closes (``quiet``). The batch's tasks
are ``fleet``'s."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..errors import Failure, Kind, usage
from ..text import sanitize


def connect(address: str):
    """A client of the scheduler at ``address``; a bad address is a usage error, an unreachable
    one a setup failure (Dask's own connect timeout bounds the wait)."""
    try:
        import distributed
    except ImportError:
        raise Failure(
            Kind.SETUP, "--dask-scheduler needs Dask's distributed package: pip install 'processkit[dask]'"
        ) from None
    try:
        return distributed.Client(address)
    except ValueError as exc:  # an address Dask cannot parse, or of a scheme it does not know
        raise usage(
            f"invalid value '{sanitize(address)}' for '--dask-scheduler <ADDRESS>': {sanitize(said(exc))}"
        ) from None
    except (OSError, TimeoutError) as exc:
        raise Failure(
            Kind.SETUP, f"cannot reach the Dask scheduler at {sanitize(address)}: {sanitize(said(exc))}"
        ) from None
    except Exception as exc:  # noqa: BLE001 - a transport Dask cannot set up here (its TypeError)
        scheme = address.partition("://")[0].lower() if "://" in address else ""
        raise Failure(
            Kind.SETUP,
            f"cannot connect to the Dask scheduler at {sanitize(address)}: {sanitize(said(exc))}"
            + TRANSPORT_NEEDS.get(scheme, ""),
        ) from None


# What a scheme Dask knows needs besides the address, said when connecting failed for want of it.
TRANSPORT_NEEDS = {
    "tls": " (a tls:// scheduler needs this client's certificate and key in Dask's configuration: distributed.comm.tls.client)",
    "ucx": " (a ucx:// scheduler needs Dask's UCX transport installed: the distributed-ucxx package)",
}


LOST = "the connection to the Dask scheduler was lost"


def lost(client) -> bool:
    """``client`` lost its scheduler (reconnecting, or given up): its tasks come back cancelled."""
    return client.status != "running"


def said(exc: BaseException, client=None) -> str:
    """An exception's message on one line (a remote one may carry several); where ``client`` lost
    its scheduler, that is what is said."""
    if client is not None and lost(client):
        return LOST
    text = " ".join(str(exc).split())
    if not text and isinstance(exc, (TimeoutError, asyncio.TimeoutError)):  # a bound ran out (asyncio's before 3.11)
        return "no answer in time"
    return text or type(exc).__name__


# Dask's loggers that log a traceback of their own when the scheduler goes under a call of ours
# (the client's comm closed as it was told; its reconnection given up).
DASK_LOGGERS = ("distributed.client", "distributed.core", "distributed.comm", "distributed.utils")


@contextlib.contextmanager
def closing(client):
    """``client``, closed as the block ends with Dask's own log kept quiet (``quiet``): a client
    whose scheduler went logged the traceback of its given-up reconnection as it closed."""
    try:
        yield client
    finally:
        with quiet():
            client.close()


@contextlib.contextmanager
def quiet():
    """Dask's own log (``DASK_LOGGERS``) kept to its critical lines for the block: a scheduler
    gone meanwhile is said by the client, once, in one line of its own, not as Dask's traceback.
    The client's blocks are its tellings (a stop, a halt: up to ``fleet.HALT_TOLD_S``), a stop's
    whole wait for its tasks, its forgetting and its close; while it only waits for its tasks
    (no stop, no halt), what Dask logs stays, and so does what any other thread of the process
    logs through those loggers meanwhile (the level is the logger's, not the thread's)."""
    loggers = [logging.getLogger(name) for name in DASK_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
