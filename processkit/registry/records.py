"""The registry record (``registry_version`` 1): how a run writes it, and how a reader takes it
back without trusting it (docs/control-plane.md §2.3).

A record that fails a structural check is skipped whole; an optional value that fails its own
check is dropped (null, or the label pair left out). Parsing never raises.
"""

from __future__ import annotations

from ..jsontext import dumps
from ..plain import Plain

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeGuard

REGISTRY_VERSION = 1
MAX_RECORD_BYTES = 64 * 1024
LIVENESS_KIND = "advisory_lock"

# Read side only (a run writing its record never needs ``re``): compiled on first use.
_STARTED_AT = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z"
_SHA256 = r"[0-9a-f]{64}"
_HINT = r"[a-z0-9_]{1,64}"
# Windows' device names, refused on every system as the reference refuses them: a base name
# (up to the first dot) of one of these in any case, the ports' superscript digits too.
_DEVICE_NAMES = frozenset(
    ["con", "prn", "aux", "nul"] + [f"{port}{n}" for port in ("com", "lpt") for n in "123456789\u00b9\u00b2\u00b3"]
)


class Record(Plain):
    __slots__ = (
        "run_id",
        "endpoint",
        "started_at",
        "argv_sha256",
        "hint",
        "labels",
        "jsonl",
        "capture_dir",
        "lock_file",
        "batch_records",
        "jsonl_held",
    )

    def __init__(
        self,
        run_id: str,
        endpoint: str | None,
        started_at: str,
        argv_sha256: str | None,
        hint: str | None,
        labels: dict,
        jsonl: str | None,
        capture_dir: str | None,
        lock_file: str,
        batch_records: str | None = None,
        jsonl_held: bool = False,
    ):
        self.run_id = run_id
        self.endpoint = endpoint
        self.started_at = started_at
        self.argv_sha256 = argv_sha256
        self.hint = hint
        self.labels = labels
        self.jsonl = jsonl
        self.capture_dir = capture_dir
        self.lock_file = lock_file
        self.batch_records = batch_records  # an extension: a batch's record delegating to its jobs' records
        # An extension: another run held ``jsonl`` when this one started, so it writes nothing
        # there (``engine.runner._without_stream``); the path is still the one it was given.
        self.jsonl_held = jsonl_held

    @property
    def stream(self) -> str | None:
        """The stream of this run's own to read back: ``jsonl``, but none where another run holds
        that file (its head may even name this run id: two runs started with the same flags)."""
        return None if self.jsonl_held else self.jsonl

    def encode(self) -> bytes:
        """The record's bytes, fields in emission order; raises UnicodeEncodeError for a
        value that is not valid Unicode (the reader would skip such a record anyway)."""
        document = {
            "registry_version": REGISTRY_VERSION,
            "run_id": self.run_id,
            "endpoint": self.endpoint,
            "started_at": self.started_at,
            "argv_sha256": self.argv_sha256,
            "hint": self.hint,
            "labels": self.labels,
            "jsonl": self.jsonl,
            "capture_dir": self.capture_dir,
            "liveness": {"kind": LIVENESS_KIND, "lock_file": self.lock_file},
        }
        if self.batch_records is not None:  # an unknown field to a v1 reader, which ignores it
            document["batch_records"] = self.batch_records
        if self.jsonl_held:  # as batch_records: unknown to a v1 reader, which reads the file
            document["jsonl_held"] = True
        return dumps(document).encode("utf-8")

    def matches(self, labels: dict) -> bool:
        """Every requested label is present with exactly that value."""
        return all(self.labels.get(key) == value for key, value in labels.items())


def parse(text: str) -> Record | None:
    """The record ``text`` holds (a file of at most ``MAX_RECORD_BYTES``, decoded by its reader,
    ``scan.reread``), or None when it must be skipped."""
    import json  # read side only, as ``re`` and ``text`` below: a run writing its record never needs them

    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or type(document.get("registry_version")) is not int:
        return None
    liveness = document.get("liveness")
    run_id = document.get("run_id")
    started_at = document.get("started_at")
    if (
        document["registry_version"] != REGISTRY_VERSION
        or not isinstance(liveness, dict)
        or liveness.get("kind") != LIVENESS_KIND
        or not valid_lock_name(liveness.get("lock_file"))
        or not _is_text(run_id)
        or not valid_started_at(started_at)
    ):
        return None
    # The run id is identity, kept exact as the reference keeps it (any string): one a new run
    # could not be given (a control character, over 256 characters) still names a record that
    # list, prune, wait and the control clients must see; human output cleans it where shown.
    return Record(
        run_id=run_id,
        endpoint=_path(document.get("endpoint")),
        started_at=started_at,
        argv_sha256=_matching(document.get("argv_sha256"), _SHA256),
        hint=_matching(document.get("hint"), _HINT),
        labels=_labels(document.get("labels")),
        jsonl=_path(document.get("jsonl")),
        capture_dir=_path(document.get("capture_dir")),
        lock_file=liveness["lock_file"],
        batch_records=_path(document.get("batch_records")),
        jsonl_held=document.get("jsonl_held") is True,
    )


def no_stream_of_its_own(path: str | None) -> str:
    """Why a run whose record says ``jsonl_held`` has no stream to read (``events --run-id``, an
    attached handle's ``events()``), in the frame of the reference's words for a run without one."""
    return (
        f"its registry record publishes no JSONL stream of its own — another run held its `--jsonl` file `{path}` "
        "when it started, so it went on without writing its events, and that file holds the other run's"
    )


def valid_started_at(value: object) -> TypeGuard[str]:
    """``YYYY-MM-DDTHH:MM:SS.sssZ`` naming a real calendar instant."""
    if not isinstance(value, str) or not _fullmatch(_STARTED_AT, value):
        return False
    import datetime  # read side only: a run writing its record never needs it

    try:
        datetime.datetime.fromisoformat(value[:-1])
    except ValueError:
        return False
    return True


def valid_lock_name(name) -> bool:
    """A single plain ``*.lock`` file name: nothing that could point outside the directory, no
    control character (the reference's rule), and valid Unicode, so it names one file's bytes.
    A name too long for the file system is one: its record is listed, its lock unprobed."""
    from ..text import is_control

    return (
        _is_text(name)
        and len(name) > len(".lock")
        and name.endswith(".lock")
        and not any(ch in name for ch in "/\\:")
        and not any(is_control(ch) for ch in name)
        and name.split(".", 1)[0].lower() not in _DEVICE_NAMES
    )


def _is_text(value) -> TypeGuard[str]:
    """A string that is valid Unicode: no lone surrogate, which Python's JSON reader lets
    through and the reference's (serde) refuses."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fullmatch(pattern: str, value: str) -> bool:
    import re  # caches what it compiles

    return re.fullmatch(pattern, value) is not None


def _matching(value, pattern: str) -> str | None:
    return value if isinstance(value, str) and _fullmatch(pattern, value) else None


def _path(value) -> str | None:
    return value if isinstance(value, str) and value and "\0" not in value else None


def _labels(value) -> dict:
    from ..text import is_valid_label_key, is_valid_label_value

    if not isinstance(value, dict):
        return {}
    return {
        key: text
        for key, text in value.items()
        if is_valid_label_key(key) and isinstance(text, str) and is_valid_label_value(text)
    }
