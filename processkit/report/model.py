"""A run as a report shows it: the facts of one JSONL stream, as typed values (``reading``
gathers them from the stream).

The stream is untrusted and may be damaged (cut short, still being written, invalid lines, a
runner killed before ``runner_exit``). Every string taken from the stream reaches the page
through ``shown`` (terminal escapes written out as text); HTML escaping is the templates' job.
"""

from __future__ import annotations

import os

from ..events.types import CapturedStream
from ..text import escape_unsafe
from ..plain import Plain

READ_CHUNK = 256 * 1024
TEXT_LIMIT = 300  # one field's characters on the page
NOTES_SHOWN = 20  # invalid lines named one by one; the rest are counted
PLACE_DEPTH = 16  # the most components of a recorded capture path tried inside its directory
# A stream with no runner_exit that no runner registered here writes, and what may be why: said
# by the page's missing section (``reading``) and by a ring's capture read back from its live
# record (``tail.RECOVERED``), so neither names fewer causes than the other. "The stream file":
# beside a capture, "the file" would read as the capture's.
UNFINISHED = (
    "the runner was killed, the stream file was cut short or copied mid-run, or its run is not in this user's "
    "registry (another user's run, or one that could not register) and may still be going on"
)
NO_RUNNER_EXIT = f"the stream ends without runner_exit and no runner registered here writes it: {UNFINISHED}"
# A root's exit whose teardown could not count the tree (``cleanup_started``'s read_error): its 0 is no count.
UNCOUNTED = "how many processes outlived it is not known (the member read before the teardown failed)"


def shown(value, limit: int = TEXT_LIMIT) -> str:
    """A stream value as page text: unsafe characters as their escapes, length capped."""
    text = value if isinstance(value, str) else str(value)
    if not (text.isascii() and text.isprintable()):  # printable ASCII (most text) is safe as it is
        text = escape_unsafe(text)
    return text if len(text) <= limit else text[:limit] + "…"


class Moment(Plain):
    """One event on the run's time axis."""

    offset_ms: int | None
    name: str
    words: str
    kind: str  # start | snapshot | ending | limit | teardown | exit | failure | other


class SeenProcess(Plain):
    """One process seen in the members snapshots, and when it was seen."""

    pid: int
    ppid: int | None
    name: str
    depth: int
    first_ms: int
    until_ms: int
    is_root: bool = False
    outlived_root: bool = False
    survived_teardown: bool = False


class Run(Plain):
    """Everything a report shows about one stream."""

    source: str  # the stream's path as shown (escaped)
    anchor: str
    path: str = ""  # the stream's path as given: its captures are looked for beside it
    run_id: str | None = None
    labels: list[tuple[str, str]] = []
    command: str | None = None  # the argv, only when the run recorded it (--argv-raw)
    fingerprint: str | None = None  # the argv's SHA-256, always recorded
    hint: str | None = None
    mechanism: str | None = None
    cwd: str | None = None
    root_pid: int | None = None
    exit_code: int | None = None
    exit_source: str | None = None
    child_code: int | None = None
    duration_ms: int | None = None
    ending: str = ""
    moments: list[Moment] = []
    members: list[SeenProcess] = []
    snapshots: int = 0
    outlived_count: int | None = 0  # None: not counted (``cleanup_started``'s read failed)
    resources: list[tuple[str, str]] = []
    peak_memory: int | None = None
    cpu_ms: int | None = None
    limits: list[tuple[str, str]] = []
    captured: list[CapturedStream] = []  # as output_captured reports them
    live: bool = False  # a registered runner still writes the stream
    missing: list[str] = []

    @property
    def complete(self) -> bool:
        return self.exit_code is not None

    @property
    def failed(self) -> bool:
        return self.exit_code != 0

    @property
    def command_hint(self) -> str:
        """The command as far as the stream tells it: the argv, else the hint, else that it
        was redacted."""
        return self.command or (f"redacted; looks like {self.hint}" if self.hint else "redacted")

    @property
    def bytes_captured(self) -> int | None:
        return sum(c.bytes_seen for c in self.captured) if self.captured else None


# -- reading -------------------------------------------------------------------------------------
def capture_place(stream: CapturedStream, capture_dir: str | None, source: str) -> tuple[str, str]:
    """Where a stream's capture is read: ``(the directory given, the file's path inside it)``.
    The directory is ``capture_dir`` when given (the file its recorded name), else the one that
    holds the stream; the file is then the longest end of the recorded path that names an entry
    there (``cap/stdout.log`` beside ``run.jsonl``; a batch job's ``capture/stderr.log``). The
    path is untrusted: it is never read where it points, only inside that directory, through
    ``userfiles.open_named``'s guard (a relative one is not the reporter's working directory's)."""
    name = os.path.basename(stream.path)
    if capture_dir is not None:
        return capture_dir, name
    directory = os.path.dirname(source) or "."
    parts = [part for part in stream.path.split("/") if part not in ("", ".")][-PLACE_DEPTH:]
    if ".." in parts:
        parts = parts[len(parts) - parts[::-1].index("..") :]
    for start in range(len(parts)):
        inside = "/".join(parts[start:])
        if os.path.lexists(os.path.join(directory, inside)):
            return directory, inside
    return directory, name
