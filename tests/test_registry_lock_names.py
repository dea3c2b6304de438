"""A hand-written record's lock file name, read as the reference reads it: its device names
refused on every system (the ports' superscript digits too), and a name too long for the file
system still a run whose liveness is unknown, not a record dropped."""

from __future__ import annotations

import json

from conftest import run_cli
from control_support import cli_json, envelope, listed
from control_support import registry_record as _record


def _plant(registry, stem: str, document: dict) -> None:
    (registry / f"{stem}.json").write_text(json.dumps(document))


def test_a_ports_superscript_name_is_a_device_and_its_record_is_skipped(isolated_registry):
    # The reference's own list (src/registry/tests.rs, unsafe_lock_file_names_are_rejected):
    # Windows still reserves COM¹-COM³ and LPT¹-LPT³, so a record naming one is skipped on every
    # system, as CON.lock is; com10.lock and com0.lock are plain names.
    for stem, lock in [
        ("sup1", "COM\u00b9.lock"),
        ("sup2", "com\u00b2.lock"),
        ("sup3", "LPT\u00b3.tar.lock"),
        ("port", "lpt9.lock"),
        ("plain10", "com10.lock"),
        ("plain0", "com0.lock"),
    ]:
        _plant(isolated_registry, stem, _record(stem, lock))
        (isolated_registry / lock).touch()
    assert [row["run_id"] for row in listed()] == ["plain0", "plain10"]


def test_a_lock_name_too_long_to_open_is_an_unprobed_run(isolated_registry):
    # The reference validates the name's shape, not its length: opening it fails
    # (ENAMETOOLONG), so its liveness is unknown; the entry is listed `unprobed`, refused with
    # that kind, never waited out as finished, and left in place by prune.
    _plant(isolated_registry, "long", _record("long", "a" * 300 + ".lock"))
    (row,) = listed()
    assert (row["run_id"], row["health"]) == ("long", "unprobed")
    refused = run_cli("--error-format", "json", "inspect", "--run-id", "long")
    assert refused.returncode == 103
    assert envelope(refused)["kind"] == "unprobed"
    waited = run_cli("wait", "--run-id", "long", "--timeout", "150ms")
    assert waited.returncode == 112 and b"not confirmed finished" in waited.stderr
    assert cli_json("prune", "--json") == {"pruned": 0, "live": 0, "unprobed": 1, "orphaned_locks": 0}
    assert (isolated_registry / "long.json").exists()
