"""Failure kinds and the exit codes they map to: the single place where codes are decided.

Every runner-own failure travels as a :class:`Failure` value carrying its :class:`Kind`; the
CLI renders it (human line or JSON envelope) and exits with ``kind.code``. Nothing else in the
package picks an exit code.
"""

from __future__ import annotations

import enum

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

RESERVED_BAND = range(100, 120)

# A client whose stdout reader went away (``list | head -1``) ends quietly with the status a
# filter killed by SIGPIPE shows: outside the reserved band, so no runner code is faked.
STDOUT_CLOSED = 128 + 13

# Inside Kind's body, a member named like a code constant shadows it for later members.
_SETUP_CODE = SETUP


class Kind(enum.Enum):
    """A failure's machine name (the envelope's ``kind``) and its exit code."""

    USAGE = ("usage", USAGE)
    SPAWN_ERROR = ("spawn_error", SPAWN)
    CONTAINER_ERROR = ("container_error", BACKEND)
    INTERNAL = ("internal", INTERNAL)
    TIMEOUT = ("timeout", TIMEOUT)
    CANCELLED = ("cancelled", CANCELLED)
    CONTROL_CANCEL = ("control_cancel", CONTROL_CANCELLED)
    CONTROL_KILL = ("control_kill", CONTROL_KILLED)
    SETUP = ("setup", SETUP)
    OUTPUT_OVERFLOW = ("output_overflow", OUTPUT_OVERFLOW)
    NOT_FOUND = ("not_found", CONTROL)
    STALE = ("stale", CONTROL)
    UNPROBED = ("unprobed", CONTROL)
    AMBIGUOUS_RUN_ID = ("ambiguous_run_id", CONTROL)
    CONTROL_UNREACHABLE = ("control_unreachable", CONTROL)
    IPC_DEADLINE = ("ipc_deadline", CONTROL)
    INCOMPATIBLE_CONTRACT = ("incompatible_contract", CONTROL)
    PEER_IDENTITY_UNSUPPORTED = ("peer_identity_unsupported", CONTROL)
    REGISTRY_BY_ID = ("registry", CONTROL)
    REGISTRY = ("registry", _SETUP_CODE)
    PROBE_INCOMPATIBLE = ("probe_incompatible", PROBE_INCOMPATIBLE)
    WAIT_TIMEOUT = ("wait_timeout", WAIT_TIMEOUT)
    EVENTS_INVALID = ("events_invalid", EVENTS_INVALID)
    NOT_A_MEMBER = ("not_a_member", NOT_A_MEMBER)
    HOST_UNQUALIFIED = ("host_unqualified", HOST_UNQUALIFIED)
    UNKNOWN = ("unknown", _SETUP_CODE)

    @property
    def label(self) -> str:
        return self.value[0]

    @property
    def code(self) -> int:
        return self.value[1]

    @property
    def retryable(self) -> bool:
        return self in (Kind.UNPROBED, Kind.IPC_DEADLINE, Kind.WAIT_TIMEOUT)


def exit_codes() -> dict[int, list[str]]:
    """Each code the runner can end with and the failure kinds behind it, in code order: what
    ``--help`` and the man pages print, so what they say is this table."""
    table: dict[int, list[str]] = {}
    for kind in Kind:
        labels = table.setdefault(kind.code, [])
        if kind.label not in labels:
            labels.append(kind.label)
    return dict(sorted(table.items()))


class Failure(Exception):
    """A runner-own failure: what went wrong, in words, and which kind it is.

    ``code`` overrides the kind's code only where a code is relayed from elsewhere (a detached
    copy's exit status). ``hint`` is program text shown on a line of its own after the message
    (a usage line): the message may quote user input, the hint never does.
    """

    def __init__(self, kind: Kind, message: str, *, code: int | None = None, hint: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.hint = hint
        self.relayed = code is not None
        self.code = kind.code if code is None else code


class StdoutClosed(Exception):
    """The reader of the command's stdout went away (EPIPE): nothing more can be delivered."""


def usage(message: str, hint: str | None = None) -> Failure:
    return Failure(Kind.USAGE, message, hint=hint)
