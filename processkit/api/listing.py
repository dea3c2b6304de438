"""``processkit.runs``: the registry as ``processkit-cli list --json`` shows it, one record per run
this user's registry holds, read through the API's one door to it (``control``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from . import control


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """One registry record, as ``processkit-cli list --json`` shows it."""

    run_id: str
    health: str
    started_at: str
    hint: str | None
    argv_sha256: str | None
    labels: dict
    jsonl: str | None
    capture_dir: str | None
    endpoint: str | None


def runs(labels: dict | None = None) -> list[RunInfo]:
    """The runs this user's registry holds (live, stale or unprobed), optionally only those
    carrying every one of ``labels``."""
    wanted = _wanted(labels)
    found = []
    for record, health in control.entries():
        if record.matches(wanted):
            fields = {
                key: value for key, value in record._asdict().items() if key not in ("lock_file", "batch_records")
            }
            found.append(RunInfo(health=health, **fields))
    return found


def _wanted(labels) -> dict[str, str]:
    """``labels`` as ``run``'s mapping form is read (each key and value a string, named when not):
    ``"team=a"`` raised dict()'s ``dictionary update sequence element #0 ...``, and ``{"n": 7}``
    matched no run, a run's labels being strings, and returned ``[]`` without a word."""
    from ..grammar.keywords import mapping_items

    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise TypeError(f"labels takes a mapping of strings, not {type(labels).__name__}")
    return dict(mapping_items("labels", labels))
