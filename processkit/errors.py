"""Failure kinds and the exit codes they map to: the single place where codes are decided.

Every runner-own failure travels as a :class:`Failure` value carrying its :class:`Kind`; the
CLI renders it (human line or JSON envelope) and exits with ``kind.code``. Nothing else in the
package picks an exit code.
"""

from __future__ import annotations

import os

from .plain import Constant

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

USAGE = 100
SPAWN = 101
BACKEND = 102
CONTROL = 103
INTERNAL = 104
TIMEOUT = 106
CANCELLED = 107
CONTROL_CANCELLED = 108
CONTROL_KILLED = 109
PROBE_INCOMPATIBLE = 110
SETUP = 111
WAIT_TIMEOUT = 112
OUTPUT_OVERFLOW = 113
EVENTS_INVALID = 114
NOT_A_MEMBER = 115
HOST_UNQUALIFIED = 116
BATCH_FAILED = 117  # ``batch``: a job did not exit 0, or was not started
BENCH_FAILED = 118  # ``bench``: a benchmarked command failed, or could not start
BENCH_REGRESSED = 119  # ``bench --fail-if-slower``: significantly slower than the baseline

RESERVED_BAND = range(100, 120)

# A client whose stdout reader went away (``list | head -1``) ends quietly with the status a
# filter killed by SIGPIPE shows: outside the reserved band, so no runner code is faked.
STDOUT_CLOSED = 128 + 13


class Kind(Constant):
    """A failure's machine name (the envelope's ``kind``, its ``value``) and its exit code: a
    ``Constant``, compared by identity, listed in declaration order by ``Kind.members()``."""

    __slots__ = ("code", "retryable")
    USAGE: ClassVar[Kind]
    SPAWN_ERROR: ClassVar[Kind]
    CONTAINER_ERROR: ClassVar[Kind]
    INTERNAL: ClassVar[Kind]
    TIMEOUT: ClassVar[Kind]
    CANCELLED: ClassVar[Kind]
    CONTROL_CANCEL: ClassVar[Kind]
    CONTROL_KILL: ClassVar[Kind]
    SETUP: ClassVar[Kind]
    OUTPUT_OVERFLOW: ClassVar[Kind]
    NOT_FOUND: ClassVar[Kind]
    STALE: ClassVar[Kind]
    UNPROBED: ClassVar[Kind]
    AMBIGUOUS_RUN_ID: ClassVar[Kind]
    CONTROL_UNREACHABLE: ClassVar[Kind]
    IPC_DEADLINE: ClassVar[Kind]
    INCOMPATIBLE_CONTRACT: ClassVar[Kind]
    PEER_IDENTITY_UNSUPPORTED: ClassVar[Kind]
    REGISTRY_BY_ID: ClassVar[Kind]
    REGISTRY_SETUP: ClassVar[Kind]
    PROBE_INCOMPATIBLE: ClassVar[Kind]
    WAIT_TIMEOUT: ClassVar[Kind]
    EVENTS_INVALID: ClassVar[Kind]
    NOT_A_MEMBER: ClassVar[Kind]
    HOST_UNQUALIFIED: ClassVar[Kind]
    BATCH_FAILED: ClassVar[Kind]
    BENCH_FAILED: ClassVar[Kind]
    BENCH_REGRESSED: ClassVar[Kind]
    UNKNOWN: ClassVar[Kind]

    def __init__(self, name: str, label: str, code: int, *, retryable: bool = False):
        super().__init__(name, label)
        self.code = code
        self.retryable = retryable  # the envelope's ``retryable``: the same request may succeed later

    @property
    def label(self) -> str:
        """The envelope's ``kind`` word (several kinds may share one: ``registry``)."""
        return self.value


Kind.USAGE = Kind("USAGE", "usage", USAGE)
Kind.SPAWN_ERROR = Kind("SPAWN_ERROR", "spawn_error", SPAWN)
Kind.CONTAINER_ERROR = Kind("CONTAINER_ERROR", "container_error", BACKEND)
Kind.INTERNAL = Kind("INTERNAL", "internal", INTERNAL)
Kind.TIMEOUT = Kind("TIMEOUT", "timeout", TIMEOUT)
Kind.CANCELLED = Kind("CANCELLED", "cancelled", CANCELLED)
Kind.CONTROL_CANCEL = Kind("CONTROL_CANCEL", "control_cancel", CONTROL_CANCELLED)
Kind.CONTROL_KILL = Kind("CONTROL_KILL", "control_kill", CONTROL_KILLED)
Kind.SETUP = Kind("SETUP", "setup", SETUP)
Kind.OUTPUT_OVERFLOW = Kind("OUTPUT_OVERFLOW", "output_overflow", OUTPUT_OVERFLOW)
Kind.NOT_FOUND = Kind("NOT_FOUND", "not_found", CONTROL)
Kind.STALE = Kind("STALE", "stale", CONTROL)
Kind.UNPROBED = Kind("UNPROBED", "unprobed", CONTROL, retryable=True)
Kind.AMBIGUOUS_RUN_ID = Kind("AMBIGUOUS_RUN_ID", "ambiguous_run_id", CONTROL)
Kind.CONTROL_UNREACHABLE = Kind("CONTROL_UNREACHABLE", "control_unreachable", CONTROL)
Kind.IPC_DEADLINE = Kind("IPC_DEADLINE", "ipc_deadline", CONTROL, retryable=True)
Kind.INCOMPATIBLE_CONTRACT = Kind("INCOMPATIBLE_CONTRACT", "incompatible_contract", CONTROL)
Kind.PEER_IDENTITY_UNSUPPORTED = Kind("PEER_IDENTITY_UNSUPPORTED", "peer_identity_unsupported", CONTROL)
# One label, two codes, as the reference fixes them: an unreadable registry is a by-id client's
# control failure (103), and a setup failure (111) of a command over the whole registry (list,
# prune, wait, --all) and of every other reader.
Kind.REGISTRY_BY_ID = Kind("REGISTRY_BY_ID", "registry", CONTROL)
Kind.REGISTRY_SETUP = Kind("REGISTRY_SETUP", "registry", SETUP)
Kind.PROBE_INCOMPATIBLE = Kind("PROBE_INCOMPATIBLE", "probe_incompatible", PROBE_INCOMPATIBLE)
Kind.WAIT_TIMEOUT = Kind("WAIT_TIMEOUT", "wait_timeout", WAIT_TIMEOUT, retryable=True)
Kind.EVENTS_INVALID = Kind("EVENTS_INVALID", "events_invalid", EVENTS_INVALID)
Kind.NOT_A_MEMBER = Kind("NOT_A_MEMBER", "not_a_member", NOT_A_MEMBER)
Kind.HOST_UNQUALIFIED = Kind("HOST_UNQUALIFIED", "host_unqualified", HOST_UNQUALIFIED)
Kind.BATCH_FAILED = Kind("BATCH_FAILED", "batch_failed", BATCH_FAILED)
Kind.BENCH_FAILED = Kind("BENCH_FAILED", "bench_failed", BENCH_FAILED)
Kind.BENCH_REGRESSED = Kind("BENCH_REGRESSED", "bench_regressed", BENCH_REGRESSED)
Kind.UNKNOWN = Kind("UNKNOWN", "unknown", SETUP)
KINDS = Kind.members()  # in declaration order


def kind_labelled(label: str, code: int | None = None) -> Kind:
    """The kind a relayed failure names by its envelope word: the one with its ``code`` too where
    a label has two (``registry``), ``Kind.UNKNOWN`` for a word this copy does not know."""
    named = [kind for kind in KINDS if kind.label == label]
    return next((kind for kind in named if kind.code == code), named[0] if named else Kind.UNKNOWN)


def exit_codes() -> dict[int, list[str]]:
    """Each code the runner can end with and the failure kinds behind it, in code order: what
    ``--help`` and the man pages print, so what they say is this table."""
    table: dict[int, list[str]] = {}
    for kind in KINDS:
        labels = table.setdefault(kind.code, [])
        if kind.label not in labels:
            labels.append(kind.label)
    return dict(sorted(table.items()))


class Failure(Exception):
    """A runner-own failure: what went wrong, in words, and which kind it is.

    ``code`` overrides the kind's code only where a code is relayed from elsewhere (a detached
    copy's exit status). ``hint`` is program text shown on a line of its own after the message
    (a usage line): the message may quote user input, the hint never does. ``parse_time``: a
    usage error met as the command line and its inputs were read, before any work, which stays
    human text under ``--error-format json`` as the reference's parse errors do; not a usage code
    relayed from a detached copy, nor one raised with ``parse_time=False``: met by a batch once
    its first job was taken (``template_flags.Streamed``: a later argument line's).
    """

    def __init__(
        self, kind: Kind, message: str, *, code: int | None = None, hint: str | None = None, parse_time: bool = True
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.hint = hint
        self.parse_time = parse_time and kind is Kind.USAGE and code is None
        self.code = kind.code if code is None else code


class StdoutClosed(Exception):
    """The reader of the command's stdout went away (EPIPE): nothing more can be delivered."""


def usage(message: str, hint: str | None = None) -> Failure:
    return Failure(Kind.USAGE, message, hint=hint)


def internal_failure(detail: str) -> Failure:
    """The runner's own failure (a bug), in its one wording: ``internal error: <detail>``."""
    return Failure(Kind.INTERNAL, f"internal error: {detail}")


def os_error_words(exc: OSError) -> str:
    """A system error as the reference shows one (Rust's ``io::Error``): the system's words,
    then its number; a reason of this build's own (a refusal raised with its own words) is
    shown alone, as Rust shows a custom ``io::Error``."""
    said = exc.strerror or str(exc)
    if exc.errno and said == os.strerror(exc.errno):
        return f"{said} (os error {exc.errno})"
    return said


def utf8_error_words(exc: UnicodeDecodeError) -> str:
    """Bytes that are not UTF-8 as the reference says them (Rust's ``Utf8Error``): both count
    the bad sequence as Unicode's maximal subpart, so Python's span is Rust's length."""
    if exc.reason == "unexpected end of data":
        return f"incomplete utf-8 byte sequence from index {exc.start}"
    return f"invalid utf-8 sequence of {exc.end - exc.start} bytes from index {exc.start}"


def setup_failure(what: str, exc: OSError) -> Failure:
    """An input or output a run could not set up (111), in the reference's frame: ``what``, then
    the system's error as :func:`os_error_words` shows it."""
    return Failure(Kind.SETUP, f"{what}: {os_error_words(exc)}")
