"""Registry lock files read as the reference reads them: a record's lock name refused where it
is a device name on any system (the ports' superscript digits too), one too long for the file
system still a run whose liveness is unknown, and an old lock no record names counted by
``prune`` as held or unprobeable when it is."""

from __future__ import annotations

import fcntl
import json
import os

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


def test_an_old_lock_with_no_record_held_or_unprobeable_is_counted_as_the_reference_counts_it(
    isolated_registry,
):
    # The reference's prune (src/registry/tests.rs: prune_never_reaps_a_live_orphaned_lock_file,
    # prune_leaves_an_unprobeable_orphaned_lock_file_in_place): such a lock is kept and counted
    # `live` or `unprobed`; a free one is reaped as `orphaned_locks`.
    held = isolated_registry / "held.lock"
    held.touch()
    holder = os.open(held, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    (isolated_registry / "directory.lock").mkdir()
    (isolated_registry / "free.lock").touch()
    for name in ("held.lock", "directory.lock", "free.lock"):
        os.utime(isolated_registry / name, (0, 0))
    try:
        expected = {"pruned": 0, "live": 1, "unprobed": 1, "orphaned_locks": 1}
        preview = cli_json("prune", "--dry-run", "--json")
        assert preview.pop("candidates") == [{"kind": "orphaned_lock", "lock_file_name": "free.lock"}]
        assert preview == expected
        assert cli_json("prune", "--json") == expected
        assert sorted(os.listdir(isolated_registry)) == ["directory.lock", "held.lock"]
    finally:
        os.close(holder)
