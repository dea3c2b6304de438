"""The client's side of ``--dask-scheduler`` as Dask sees it: its connection to the scheduler
(``connect``), an exception of Dask's said on one line (``said``; a task's worker lost or the
task cancelled said as what happened to it), and Dask's own log kept quiet
while the client tells the workers, waits out a stop and closes (``quiet``), and off stderr
altogether under ``--error-format json`` (``_dask_log_off``). The batch's tasks
are ``fleet``'s."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import warnings

from ..diagnostics import enveloped, warn
from ..engine.stop_raise import Stopped
from ..errors import Failure, Kind, usage
from ..text import cut, plural, sanitize


def connect(address: str):
    """A client of the scheduler at ``address``; a bad address is a usage error, an unreachable
    one a setup failure (Dask's own connect timeout bounds the wait)."""
    try:
        import distributed
    except ImportError:
        raise Failure(
            Kind.SETUP, "--dask-scheduler needs Dask's distributed package: pip install 'processkit[dask]'"
        ) from None
    if enveloped():
        _dask_log_off()
    try:
        return distributed.Client(address)
    except ValueError as exc:  # an address Dask cannot parse, or of a scheme it does not know
        raise usage(f"invalid value '{cut(address)}' for '--dask-scheduler <ADDRESS>': {said(exc)}") from None
    except (OSError, TimeoutError) as exc:
        raise Failure(Kind.SETUP, f"cannot reach the Dask scheduler at {sanitize(address)}: {said(exc)}") from None
    except Stopped:  # a stop signal in the wait (``fleet``'s set-up): the batch's stop, no failure to connect
        raise
    except Exception as exc:  # noqa: BLE001 - a transport Dask cannot set up here (its TypeError)
        scheme = address.partition("://")[0].lower() if "://" in address else ""
        raise Failure(
            Kind.SETUP,
            f"cannot connect to the Dask scheduler at {sanitize(address)}: {said(exc)}"
            + TRANSPORT_NEEDS.get(scheme, ""),
        ) from None


def _dask_log_off() -> None:
    """Every log record and Python warning silenced for the rest of this process (the CLI's own:
    only its batch connects), under ``--error-format json``: stderr holds the envelope alone. The
    client's ``Couldn't gather 1 keys, rescheduling ...`` (a result its worker did not give at the
    first ask), logged while it waits for its tasks, and its ``VersionMismatchWarning`` (a
    ``warnings.warn`` when the client's packages differ from the cluster's), reached stderr ahead
    of the envelope, where a CI reader parsing stderr as one JSON document failed on them; Dask's
    handler also sits on ``tornado``'s loggers, and loggers made later would need their own level."""
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")


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
    """An exception's message on one line, terminal-safe and bounded (``sanitize``: a remote one
    may carry several lines, and anything); where ``client`` lost its scheduler, that is what is
    said."""
    if client is not None and lost(client):
        return LOST
    text = _dask_said(exc) or " ".join(str(exc).split())
    if not text and isinstance(exc, (TimeoutError, asyncio.TimeoutError)):  # a bound ran out (asyncio's before 3.11)
        return "no answer in time"
    return sanitize(text or type(exc).__name__)


def _dask_said(exc: BaseException) -> str | None:
    """Why Dask failed a task without its function failing, said as what happened to the task: its
    worker lost (``KilledWorker``, whose own text is a paragraph that names the worker past the
    line's bound), or the task cancelled by the scheduler (a cluster restarted, another client's
    cancel; the loss of the scheduler is ``LOST``). None for any other exception."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    if isinstance(exc, distributed.KilledWorker):
        return f"its Dask worker was lost{_killed_said(exc)}"
    reason = getattr(exc, "reason", None)  # distributed's FutureCancelledError
    if isinstance(exc, distributed.CancelledError) and isinstance(reason, str):
        if reason == "scheduler-connection-lost":
            return LOST
        parts = [] if reason == "unknown" else [reason]  # Dask's stand-in where none was given
        why = " ".join(str(getattr(exc, "msg", None) or "").split())
        parts += [why] if why else []
        return f"cancelled by Dask ({': '.join(parts)})" if parts else "cancelled by Dask"
    return None


def _killed_said(exc: BaseException) -> str:
    """A ``KilledWorker``'s worker and the scheduler's allowed-failures, each as far as this Dask's
    exception holds them (read with fallbacks: another version's never raises here)."""
    address = _read(_read(exc, "last_worker"), "address")
    allowed = _read(exc, "allowed_failures")
    parts = [address] if isinstance(address, str) else []
    if isinstance(allowed, int):
        parts.append(f"{plural(allowed + 1, 'worker')} lost under it, past the scheduler's allowed-failures {allowed}")
    return f" ({'; '.join(parts)})" if parts else ""


def _read(thing: object, name: str) -> object:
    """``thing.name``, or None where it is missing or cannot be read (Dask's own properties index
    the exception's ``args``, which another version may make otherwise)."""
    try:
        return getattr(thing, name, None)
    except Exception:  # noqa: BLE001 - a property that fails: said without it
        return None


NO_WORKER_S = 30.0  # how often, while the batch waits for its tasks, the cluster is asked whether it has a worker


@contextlib.contextmanager
def no_worker_said(client, out):
    """While the block waits for the batch's tasks: a cluster found with no worker (asked each
    NO_WORKER_S, from a thread of its own) at two asks in a row said in one line, with the number
    of tasks still ``out()``: Dask keeps them for a worker that joins and says nothing, so a batch
    whose workers were all lost (a worker killed with no nanny to start it again, a worker job that
    ended) waited without a word. One empty ask is not enough (workers still starting, a nanny's
    restart); said again only once workers were seen again and all lost again. A scheduler that
    cannot be asked is said where the tasks come back; one slow to answer holds only the watcher
    (never joined: the block's end, a stop signal's among them, does not wait for it, and it says
    nothing once the block is over)."""
    done = threading.Event()

    def watch() -> None:
        empty, said = 0, False  # the empty asks in a row; said since workers were last seen
        while not done.wait(NO_WORKER_S):
            try:
                if lost(client):  # its tasks come back cancelled, and say it
                    continue
                workers = client.scheduler_info().get("workers")
            except Exception:  # noqa: BLE001 - the scheduler gone meanwhile: its tasks say it
                return
            if done.is_set():
                return
            empty, said = (empty + 1, said) if not workers else (0, False)
            if empty >= 2 and not said and (waiting := out()):
                said = True
                warn(
                    f"the Dask cluster has no worker for the batch's {plural(waiting, 'task')} still out "
                    "(Dask runs them once a worker joins; a stop signal ends the batch)"
                )

    watcher = threading.Thread(target=watch, name="processkit-no-worker", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()


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
    logs through those loggers meanwhile (the level is the logger's, not the thread's), but under
    ``--error-format json``, where none of it is written (``_dask_log_off``)."""
    loggers = [logging.getLogger(name) for name in DASK_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
