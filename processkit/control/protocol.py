"""The control wire, shared by both ends: one verb line in, one JSON line out, each at most
64 KiB including its newline (docs/control-plane.md §1.2)."""

from __future__ import annotations

from ..jsontext import dumps

MAX_LINE = 64 * 1024
VERBS = ("inspect", "cancel", "kill", "attest", "usage")  # usage: an extension (inspect --usage)
STOP_VERBS = ("cancel", "kill")
SNAPSHOT_VERSION = 2
ATTESTATION_VERSION = 1
USAGE_VERSION = 1
MAX_ECHOED_CHARS = 200
TRUNCATED = "... (truncated)"
UNREADABLE = "the runner sent an unreadable response"  # a reply this client cannot read at all
OVERSIZED_REPLY = f"control-plane inspect snapshot exceeds the {MAX_LINE}-byte response limit"
# Why a line read off the socket is refused, by either end, in the reference's words (its
# read_bounded_line; tokio's read_line for bytes that are not UTF-8).
REJECTED = "control request rejected: "
LINE_TOO_LONG = f"line exceeded the {MAX_LINE}-byte control-plane limit without a terminating newline"
LINE_CUT = "the peer closed the connection before terminating its control-plane line"
NOT_UTF8 = "stream did not contain valid UTF-8"


class ProtocolError(Exception):
    """A request the server refuses; the message is the reply's ``error`` text."""


class RequestBuffer:
    """Accumulates one request's bytes; never holds more than MAX_LINE of them."""

    def __init__(self) -> None:
        self._data = bytearray()

    def room(self) -> int:
        return MAX_LINE - len(self._data)

    def feed(self, chunk: bytes) -> bytes | None:
        """The request line (without its newline) once it is complete, else None."""
        self._data += chunk[: self.room()]
        end = self._data.find(b"\n")
        if end >= 0:
            return bytes(self._data[:end])
        if not self.room():
            raise ProtocolError(REJECTED + no_line(bytes(self._data), LINE_TOO_LONG))
        return None

    def finish(self) -> bytes:
        """The client stopped sending: nothing at all is an empty request (``inspect``, as the
        reference reads it), part of a line is refused."""
        if self._data:
            raise ProtocolError(REJECTED + no_line(bytes(self._data), LINE_CUT))
        return b""


def no_line(data: bytes, why: str) -> str:
    """Why ``data``, with no newline and no more to come, is refused: bytes that are not UTF-8
    first, as the reference's read_line checks them before its bound and its cut."""
    return why if is_utf8(data) else NOT_UTF8


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def parse_request(line: bytes) -> str:
    """The verb a request line names; an empty line is ``inspect``."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(REJECTED + NOT_UTF8) from None
    verb = text.strip()
    if not verb:
        return "inspect"
    if verb not in VERBS:
        raise ProtocolError(f"unknown control request `{clip(verb, MAX_ECHOED_CHARS)}`")
    return verb


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + TRUNCATED


def error(message: str) -> dict:
    return {"error": message}


def ack(verb: str, run_id: str) -> dict:
    return {"accepted": True, "action": verb, "run_id": run_id}


def encode(message) -> bytes:
    """One JSON line, the original bytes of every string kept; a reply that would not fit the
    limit is replaced by an error, never truncated."""
    body = dumps(message).encode("utf-8", "surrogateescape")
    if len(body) >= MAX_LINE:
        body = dumps(error(OVERSIZED_REPLY)).encode()
    return body + b"\n"


def decode(line: bytes):
    """A JSON value from one line; raises ValueError (or RecursionError for absurd nesting)."""
    import json  # the client's side: a runner only encodes

    return json.loads(line.decode("utf-8", "surrogateescape"))
