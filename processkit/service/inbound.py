"""What a frame from the caller must be for the runner service to act on it (``serve.readable``):
the shape ``api.service`` and ``api.launch`` send, checked before anything is taken from it.

Facts that shape it:
- The caller's API checks its keywords, but a frame is read from a socket: a caller of another
  version, or one that writes its own frames, may send any pickle. One frame not of the shape
  (a tuple too short, a count of descriptors that is no count, a run's extra that is no dict)
  raised in the loop's reader and ended the service with every run it carried, of every
  thread. Now such a frame is refused alone: a run request with a usable id gets its own
  failure as its reply, anything else is dropped.
- Descriptors travel beside a frame (``SCM_RIGHTS``) and each frame gets those that came with
  its own bytes (``wire.Frames``); a request takes them by the count it names, in order
  (``taken``), and whatever its frame brought that it did not take is closed once the frame is
  handled, whether it was acted on, refused or did not unpickle (``serve.readable``). Before,
  they waited in one line: a request that named fewer than came, a frame over ~32 KiB read in
  several reads, one that did not unpickle, left the rest for the next request, whose child
  then got them as its streams (another call's files). A request that finds fewer than it
  names is refused (``Request.short``), never given the service's own in their place.
"""

from __future__ import annotations

from ..api import wire
from ..api.caller_env import CallerEnv
from ..api.frames import Dropped
from ..errors import Failure, Kind, internal_failure
from ..spec import RunSpec

# Each kind of frame, and how many items it has (``api.service.Connection.send``'s tuple).
LENGTHS = {"run": 4, "signal": 3, "batch": 6, "bench": 4, "spec": 3}
UNBASED = object()  # ``Specs.read``: a spec whose base is not this frame's to use; asked for whole


def problem(message: object, in_use) -> str | None:
    """Why ``message`` is not a frame the service acts on; None when it is. ``in_use``: the run
    ids of requests queued or in flight (a run request may not take one of theirs: its reply, or
    a stop meant for it, would be another call's)."""
    if type(message) is Dropped:  # read, but not to act on (``wire.Frames``): answered by its id in clear
        return message.why
    if type(message) is not tuple or len(message) < 2 or type(message[0]) is not str:  # a list is no key
        return "a frame of no kind the service knows"
    if LENGTHS.get(message[0]) != len(message):
        return "a frame of no kind the service knows"
    kind, rid = message[0], message[1]
    if type(rid) is not int:
        return "a request id that is no integer"
    if kind == "run":
        if rid in in_use:
            return "a request id already in use"
        return _run_problem(message[2], message[3])
    if kind == "signal" and type(message[2]) is not str:
        return "a stop whose source is no text"
    if kind == "spec" and not isinstance(message[2], RunSpec):
        return "a whole spec that is no run spec"
    if kind == "batch":
        return _caller_problem("a batch's", message[5], whole=True)
    if kind == "bench":
        if not _count(message[3], wire.MAX_FDS - 1):
            return "a benchmark's descriptor count out of range"
        return _caller_problem("a benchmark's", getattr(message[2], "caller", None), whole=True)
    return None


def _run_problem(spec: object, extra: object) -> str | None:
    if not isinstance(spec, (RunSpec, dict)):
        return "a run request without a run spec"
    if isinstance(spec, dict) and not all(name in RunSpec._fields for name in spec):
        return "a run spec change naming no field of a run spec"
    if type(extra) is not dict:
        return "a run request whose extra fields are no dict"
    layout = extra.get("child_fds") or (False, False, False)
    if type(layout) not in (tuple, list) or len(layout) != 3:
        return "a run request's child descriptor layout is not three flags"
    held_input = extra.get("input_fd", False)  # the input as a memfd, after the child's descriptors
    if type(held_input) is not bool:
        return "a run request's input descriptor flag is no flag"
    if not _count(extra.get("fds", 0), wire.MAX_FDS - sum(map(bool, layout)) - held_input):
        return "a run request's descriptor count out of range"
    sent = extra.get("caller")  # what changed of the caller's environment and umask (None: nothing)
    if sent is not None:
        wrong = _caller_problem("a run request's", sent, whole=False)
        if wrong is not None:
            return wrong
    base = extra.get("base")
    if base is not None and type(base) is not int:
        return "a run request's spec base is no request id"
    if not isinstance(extra.get("input") or b"", (bytes, bytearray)):
        return "a run request's input is no bytes"
    piped = extra.get("piped", (False, False))
    if type(piped) not in (tuple, list) or len(piped) != 2:
        return "a run request's piped streams are not two flags"
    return None


def _caller_problem(whose: str, sent: object, whole: bool) -> str | None:
    """Why ``sent`` is not the caller's environment and umask as ``whose`` request carries them
    (``api.caller_env.CallerEnv``): the one check of the three requests that carry them. A
    run's may leave either None (as its last one sent); a batch's and a benchmark's, whose
    process takes them as its own, carry both."""
    if type(sent) is not CallerEnv:
        return f"{whose} caller's environment is not an environment and a umask"
    env, mask = sent.env, sent.umask
    if whole and (env is None or mask is None):
        return f"{whose} caller's environment or umask is missing"
    if mask is not None and not _count(mask, 0o777):
        return f"{whose} caller's umask is no umask"
    if env is not None and not (type(env) is dict and all(type(k) is str and type(v) is str for k, v in env.items())):
        return f"{whose} caller's environment is not text to text"
    limits = sent.limits
    if whole and limits is None:
        return f"{whose} caller's resource limits are missing"
    if limits is not None and not (type(limits) is tuple and all(_limit(triple) for triple in limits)):
        return f"{whose} caller's resource limits are not (kind, soft, hard) triples"
    return None


def _limit(triple: object) -> bool:
    """A (kind, soft, hard) of ``rlimits``: small kind, each value -1 (unlimited) up to 2**63 - 1."""
    return (
        type(triple) is tuple
        and len(triple) == 3
        and _count(triple[0], 63)
        and all(type(value) is int and -1 <= value < 1 << 63 for value in triple[1:])
    )


def _count(value: object, most: int) -> bool:
    return type(value) is int and 0 <= value <= most


def answerable(message: object, in_use) -> int | None:
    """The id to reply to for a run request refused by ``problem``; None when there is none to
    reply to (no run request, no integer id, or one in use: its reply would be another call's).
    A frame dropped unread (``Dropped``) is answered by its id in clear, as a run request's: a
    batch's or a benchmark's call ends on its own connection, closed with the frame. A request
    held for its spec (``UNBASED``: in use, its spec None) is answered by the refusal of a
    frame of its id, its whole spec's (``("spec", rid)``) that the service let go as too large,
    cut or malformed: else it would wait for ever, its id in use."""
    if type(message) is Dropped:
        rid = message.rid
        if rid is None or rid <= 0:
            return None
        return rid if rid not in in_use or _held(in_use[rid]) else None
    if type(message) is not tuple or len(message) < 2 or type(message[1]) is not int:
        return None
    rid = message[1]
    if message[0] == "run":
        return rid if rid not in in_use else None
    return rid if message[0] == "spec" and rid in in_use and _held(in_use[rid]) else None


def _held(request) -> bool:
    """Whether ``request`` is held for its spec, sent whole once asked (``UNBASED``)."""
    return request.spec is None


def refusal(message: object, wrong: str) -> Failure:
    """The failure a refused frame's call gets: a frame more than the service could hold is the
    caller's limit (a set-up failure, 111), anything else the runner's own (an internal error)."""
    if type(message) is Dropped and message.unheld:
        return Failure(Kind.SETUP, f"{wrong} under its address space limit; pass large data in a file")
    return internal_failure(wrong)


def taken(fds: list[int], count: int) -> list[int]:
    """The first ``count`` of a frame's descriptors, taken out of ``fds``; the rest stay there,
    for the frame's next taker, and are closed once it is handled (``serve.readable``)."""
    first = fds[:count]
    del fds[:count]
    return first


class Specs:
    """The specs of the last run requests whose frames name a ``base`` (the library's, each the
    next one's base: ``api.wire.spec_or_changes``), by request id, a base's dropped once used:
    the library's chain holds one, and a frame the caller wrote naming a base of its own adds
    one (the oldest dropped past ``MOST``). A frame the caller wrote can still break the
    library's chain: one naming the library's last request id as its base takes that entry,
    ``MOST`` frames naming bases push it out, and one that reuses a recorded request id (a call
    of the library's that ended) would have been recorded in its place, the library's next call
    run as that frame's changes. So a frame whose base is not recorded, or whose own id was
    recorded among the last ``SEEN`` (the library never sends an id twice), is never run as it
    came: ``UNBASED``, its whole spec asked of the library (``api.sending``), which sends it (its
    chain begun again) or, for a request it never made, stops it. (``SEEN`` frames the caller
    wrote naming bases push the library's last id out of those, as ``MOST`` push its spec.)"""

    MOST = 8
    SEEN = 64
    __slots__ = ("by_rid", "seen")

    def __init__(self) -> None:
        self.by_rid: dict[int, RunSpec | None] = {}
        self.seen: dict[int, None] = {}  # the ids last recorded, in order (used as bases or not)

    def read(self, rid: int, sent, extra: dict):
        """The spec request ``rid`` sent (``sent``: whole, or its changes against its ``base``;
        a frame that names none, the caller's own, against the last recorded), recorded when its
        frame names a base; ``UNBASED`` (see above); None when it cannot be made (changes of a
        frame naming no base against none recorded, or against one with a field unset: refused
        as a spec with no run id)."""
        base = extra.get("base")
        if base is None:
            last = next(reversed(self.by_rid.values()), None)
        elif rid in self.seen or (base and base not in self.by_rid):
            return UNBASED
        else:
            last = self.by_rid.pop(base, None)
        spec = spec_of(sent, last)
        if base is not None:
            self.whole(rid, spec)
        return spec

    def whole(self, rid: int, spec) -> None:
        """``spec``, request ``rid``'s, recorded as the next one's base."""
        self.by_rid[rid], self.seen[rid] = spec, None
        if len(self.by_rid) > self.MOST:
            del self.by_rid[next(iter(self.by_rid))]
        if len(self.seen) > self.SEEN:
            del self.seen[next(iter(self.seen))]


def spec_of(sent, last):
    """A run request's spec: ``sent`` itself, or (a dict) the fields in which it differs from
    ``last``, applied to a copy: a spec in flight is never changed. ``last`` has every field set:
    the caller reads them all (``_values``) before it sends a spec whole, and pickle keeps what
    was set. A ``last`` with a field unset (a caller that wrote its own frames) gives None too."""
    if not isinstance(sent, dict):
        return sent
    if last is None:  # never sent whole: the caller's error, refused as a spec with no run id
        return None
    try:
        spec = last.copied()
    except AttributeError:
        return None
    for name, value in sent.items():
        setattr(spec, name, value)
    return spec
