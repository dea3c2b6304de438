"""One exchange with a run's control socket: connect within a deadline, send one verb line,
read one reply line of at most 64 KiB (docs/control-plane.md §1.2).

The endpoint a registry record names is untrusted: anything but the exact shape a runner
creates (``<socket base>/pkc-<token>/c.sock``, a batch job's ``j<seq>.sock``) is refused
before any connection is tried.
"""

from __future__ import annotations

import socket
import time

from ..errors import Failure, Kind, os_error_words
from ..text import WHITESPACE, sanitize
from . import protocol
from .address import reachable, release
from ..rundir_shape import reapable_dir
from ..registry.lookup import refusal

CONNECT_SECONDS = 5.0
FULL_QUEUE_FIRST_PAUSE = 0.002  # between connects while the runner's listen queue is full ...
FULL_QUEUE_LAST_PAUSE = 0.05  # ... doubling up to this
EXCHANGE_SECONDS = 5.0
MAX_PEER_TEXT = 500


def peer_text(text: str) -> str:
    """A runner's error text made safe to show, as the reference's normalize_peer_error_text:
    each unsafe character a space, the ends trimmed, capped."""
    return protocol.clip(sanitize(text, limit=len(text)).strip(WHITESPACE), MAX_PEER_TEXT)


class Channel:
    """One connection to a run's control socket: connect, then one request and its reply.

    ``action`` is what the user asked for (it names every failure); the verb sent may differ
    only in wording, never in meaning.
    """

    def __init__(self, endpoint: str | None, run_id: str, action: str):
        self.run_id = run_id
        self.action = action
        if endpoint is None or reapable_dir(endpoint) is None:
            raise self._refused("the registry entry contains an invalid control endpoint")
        self._sock = self._connect(endpoint, time.monotonic() + CONNECT_SECONDS)

    def _connect(self, endpoint: str, deadline: float) -> socket.socket:
        """Connect within ``deadline``. A full listen queue (EAGAIN: every connection slot and
        the backlog taken by other clients) means a busy runner, not a gone one: try again on
        the same socket, backing off, until the deadline; only then is it ``ipc_deadline``."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        pause = FULL_QUEUE_FIRST_PAUSE
        handle = None
        try:
            address, handle = reachable(endpoint)  # a path too long for an address goes through its directory
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError()
                sock.settimeout(remaining)
                try:
                    sock.connect(address)
                    return sock
                except BlockingIOError:
                    if time.monotonic() + pause >= deadline:
                        raise self._refused(
                            f"the live runner's connection queue stayed full for {CONNECT_SECONDS:g}s",
                            Kind.IPC_DEADLINE,
                        ) from None
                    time.sleep(pause)
                    pause = min(pause * 2, FULL_QUEUE_LAST_PAUSE)
        except TimeoutError:
            sock.close()
            raise self._refused("timed out connecting to the live runner", Kind.IPC_DEADLINE) from None
        except (OSError, ValueError) as exc:
            sock.close()
            reason = os_error_words(exc) if isinstance(exc, OSError) else exc
            raise self._refused(f"could not reach the live runner (it may have just exited): {reason}") from None
        except BaseException:
            sock.close()
            raise
        finally:
            release(handle)

    def _refused(self, detail: str, kind: Kind = Kind.CONTROL_UNREACHABLE) -> Failure:
        return refusal(self.action, self.run_id, detail, kind)

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def request(self, verb: str) -> dict:
        """Send ``verb``, return the reply object; a runner's ``{"error":..}`` is a Failure."""
        deadline = time.monotonic() + EXCHANGE_SECONDS
        try:
            self._within(deadline)
            self._sock.sendall(verb.encode() + b"\n")
            line = self._read_line(deadline)
        except TimeoutError:
            raise self._refused("the runner did not answer in time", Kind.IPC_DEADLINE) from None
        except OSError as exc:
            raise self._refused(os_error_words(exc)) from None  # the reference's: the error alone
        try:
            reply = protocol.decode(line)
        except (ValueError, RecursionError):
            reply = None
        if not isinstance(reply, dict):
            raise self._refused(f"{protocol.UNREADABLE}: it is not a JSON object")
        if isinstance(reply.get("error"), str):
            raise self._refused(peer_text(reply["error"]))  # the runner's own words are the reason
        return reply

    def _within(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError()
        self._sock.settimeout(remaining)

    def _read_line(self, deadline: float) -> bytes:
        data = bytearray()
        while b"\n" not in data:
            if len(data) >= protocol.MAX_LINE:
                raise self._refused(protocol.no_line(bytes(data), protocol.LINE_TOO_LONG))
            self._within(deadline)
            chunk = self._sock.recv(protocol.MAX_LINE - len(data))
            if not chunk and not data:
                raise self._refused("the runner closed the connection before answering (it may have just exited)")
            if not chunk:
                raise self._refused(protocol.no_line(bytes(data), protocol.LINE_CUT))
            data += chunk
        line = bytes(data[: data.index(b"\n")])
        if not protocol.is_utf8(line):
            raise self._refused(protocol.NOT_UTF8)
        return line
