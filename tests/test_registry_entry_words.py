"""A run whose registry entry cannot be made goes on with one warning, in the reference's words:
``could not create the run registry entry:`` and then the error itself, as Rust shows it
(``No space left on device (os error 28)``, or the record's size against its ceiling)."""

from __future__ import annotations

import os
import re

from conftest import run_cli

NOT_REGISTERED = "processkit-cli: warning: could not create the run registry entry: "


def test_a_record_over_64_kib_is_said_with_its_size(tmp_path, isolated_registry):
    labels = [arg for n in range(300) for arg in ("--label", f"k{n}={'v' * 256}")]
    done = run_cli("run", "--jsonl", tmp_path / "run.jsonl", *labels, "--", "true")
    assert done.returncode == 0, done.stderr
    said = done.stderr.decode()
    why = r"serialized registry record is (\d+) bytes; maximum supported size is 65536 bytes"
    found = re.fullmatch(re.escape(NOT_REGISTERED) + why + "\n", said)
    assert found is not None and int(found.group(1)) > 65536, said


def test_a_registry_with_no_room_for_the_record_is_said_as_the_system_says_it(tmp_path, small_tmpfs):
    registry = small_tmpfs("registry", "size=64k,nr_inodes=2,mode=0700")  # room for the lock alone
    env = {**os.environ, "PROCESSKIT_CLI_REGISTRY_DIR": str(registry)}
    done = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--", "true", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode() == NOT_REGISTERED + "No space left on device (os error 28)\n"


def test_a_path_that_is_not_utf8_is_named_with_what_follows(tmp_path, isolated_registry):
    """A record holds text: a ``--jsonl`` (or a batch's ``--out``) of undecoded bytes is not
    published, and the warning names the path (its undecoded byte escaped, as every path is) and says
    that the run is not listed. Before: ``a recorded path is not valid UTF-8``, naming neither."""
    name = os.fsdecode(b"ev\xe9.jsonl")
    done = run_cli("run", "--jsonl", tmp_path / name, "--", "true")
    assert done.returncode == 0, done.stderr
    after = "is not valid UTF-8, so the run is not listed: list, inspect, cancel and wait cannot reach it by id\n"
    assert done.stderr.decode() == f"{NOT_REGISTERED}the path {tmp_path}/ev\\udce9.jsonl {after}"
    assert os.listdir(isolated_registry) == []
    out = tmp_path / os.fsdecode(b"out\xe9")
    done = run_cli("batch", "--out", out, "--", "true", ":::", "a")
    assert done.returncode == 0, done.stderr
    assert f"{NOT_REGISTERED}the path {tmp_path}/out\\udce9/a/events.jsonl {after}" in done.stderr.decode()
