"""Issue 33, rules 1 and 2, as the attacker did it: a second OS user plants links and FIFOs at
the paths root's outputs go to (bench's exports, ``report -o``, ``run --usage-file``, ``--jsonl``,
a bench ``--jsonl-dir`` stream), sets the registry to a shared sticky directory, swaps a batch
job's env file for a FIFO, and plants a FIFO and a link to ``/dev/zero`` in a ``report DIR``.

Nothing is written through their link or into their FIFO, no open waits, every refusal is one
clear line; the user's own links, FIFOs and device paths keep working. Every call is bounded by
a timeout, so a regression fails rather than hangs.
"""

from __future__ import annotations

import json
import os

import pytest

from conftest import run_cli
from privileges import as_user
from test_other_users import PRECIOUS, as_other, other_user, refused, shared, unregistered, victim  # noqa: F401  (fixtures)

BENCH = ("bench", "--runs", "2", "--", "true")
EXPORTS = ["--export-json", "--export-csv", "--export-markdown"]
LIMIT = 60  # seconds: far beyond what any of these takes, so a wait in open() fails the test


def bench(*args):
    return run_cli(*BENCH[:3], *args, *BENCH[3:], timeout=LIMIT)


def stream(tmp_path) -> str:
    """A finished run's stream, for ``report``."""
    jsonl = tmp_path / "run.jsonl"
    assert run_cli("run", "--jsonl", jsonl, "--", "true").returncode == 0
    return str(jsonl)


# -- rule 1: outputs written by name ---------------------------------------------------------------
@pytest.mark.parametrize("flag", EXPORTS)
def test_a_bench_export_at_another_users_link_is_refused(tmp_path, other_user, shared, victim, flag):
    path = os.path.join(shared, "bench.out")
    as_other(other_user, 'ln -s "$2" "$1"', path, victim)
    refused(bench(flag, path), "cannot write", "symbolic link of uid")
    assert victim.read_bytes() == PRECIOUS


def test_a_bench_export_under_another_users_directory_link_is_not_created(tmp_path, other_user, shared, victim):
    """``/tmp/d -> /root/secretdir``, then ``--export-json /tmp/d/b.json``: the link is not
    followed (as ``fs.protected_symlinks`` would refuse), so nothing is made in the victim's directory."""
    link = os.path.join(shared, "d")
    as_other(other_user, 'ln -s "$2" "$1"', link, victim.parent)
    refused(bench("--export-json", os.path.join(link, "b.json")), "symbolic link of uid", "sticky")
    assert sorted(os.listdir(victim.parent)) == ["victim"]


def test_report_output_at_another_users_link_is_refused(tmp_path, other_user, shared, victim):
    page = os.path.join(shared, "page.html")
    as_other(other_user, 'ln -s "$2" "$1"', page, victim)
    refused(run_cli("report", stream(tmp_path), "-o", page, timeout=LIMIT), "symbolic link of uid")
    assert victim.read_bytes() == PRECIOUS


def test_a_usage_file_at_another_users_link_is_not_written(tmp_path, other_user, shared, victim):
    """``--usage-file`` is best effort once the run has ended: one warning, the run's own code."""
    usage = os.path.join(shared, "usage.json")
    as_other(other_user, 'ln -s "$2" "$1"', usage, victim)
    result = run_cli("run", "--jsonl", tmp_path / "r.jsonl", "--usage-file", usage, "--", "true", timeout=LIMIT)
    assert result.returncode == 0 and b"could not write the usage file" in result.stderr, result.stderr
    assert b"symbolic link of uid" in result.stderr
    assert victim.read_bytes() == PRECIOUS


def test_report_to_a_descriptor_or_device_is_written_in_place_and_own_links_are_followed(tmp_path, shared):
    """``-o /dev/stdout`` and ``-o /dev/fd/N`` write into what the descriptor is (a rename there
    would replace the system's link with a file); an own link is followed, not replaced."""
    jsonl = stream(tmp_path)
    result = run_cli("report", jsonl, "-o", "/dev/stdout", timeout=LIMIT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b"<!DOCTYPE html>") and os.path.islink("/dev/stdout")
    reader, writer = os.pipe()
    with os.fdopen(reader, "rb") as pipe:
        result = run_cli("report", jsonl, "-o", f"/dev/fd/{writer}", pass_fds=(writer,), timeout=LIMIT)
        os.close(writer)
        assert result.returncode == 0, result.stderr
        assert pipe.read().startswith(b"<!DOCTYPE html>")
    assert run_cli("report", jsonl, "-o", "/dev/null", timeout=LIMIT).returncode == 0
    real, mine = tmp_path / "real.html", os.path.join(shared, "mine.html")
    os.symlink(real, mine)
    assert run_cli("report", jsonl, "-o", mine, timeout=LIMIT).returncode == 0
    assert os.path.islink(mine) and real.read_bytes().startswith(b"<!DOCTYPE html>")


def test_a_replaced_export_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    """A private file (the API's mkstemp scratch, 0600) stays private once replaced."""
    export = tmp_path / "b.json"
    export.write_text("old")
    os.chmod(export, 0o600)
    assert bench("--export-json", export).returncode == 0
    assert os.stat(export).st_mode & 0o777 == 0o600 and json.loads(export.read_text())["results"]


def test_a_registry_in_a_shared_sticky_directory_is_left_alone_and_the_child_runs(
    tmp_path, other_user, shared, monkeypatch
):
    """``PROCESSKIT_CLI_REGISTRY_DIR=/tmp``: not chmod-ed (everyone else would be locked out),
    nothing written there, and ``prune`` never deletes another user's ``*.lock`` or ``*.ended``
    there; the run warns that it is not registered and its child runs (§2.1), exit code its own."""
    as_other(other_user, ': > "$1/theirs.lock"; : > "$1/theirs.ended"', shared)
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", shared)
    result = run_cli("run", "--jsonl", tmp_path / "r.jsonl", "--", "sh", "-c", "echo ran; exit 5")
    unregistered(result, "is a shared sticky directory (mode 1777)", code=5)
    assert result.stdout == b"ran\n"
    assert os.stat(shared).st_mode & 0o7777 == 0o1777
    for client in (["prune"], ["list"], ["wait", "--all"]):
        refused(run_cli(*client), "is a directory other users can write into (mode 1777)")
    assert sorted(os.listdir(shared)) == ["theirs.ended", "theirs.lock"]


SHOW_REGISTRY = 'ls "$1"; stat -c %a "$1"'


@pytest.mark.parametrize("mode", [0o755, 0o711, 0o2750, 0o777], ids=oct)
def test_a_widened_registry_of_ones_own_is_made_0700_and_the_run_registered(tmp_path, monkeypatch, mode):
    """The reference's §2.1: a mutating open always chmods the registry 0700, repairing one a
    umask of 022 (or a chmod) widened, even to 0777; the run is registered (its record is there
    while its child runs). Only a sticky directory, a shared place by design, is never chmod-ed."""
    registry = tmp_path / "runs"
    registry.mkdir()
    os.chmod(registry, mode)
    monkeypatch.setenv("PROCESSKIT_CLI_REGISTRY_DIR", str(registry))
    result = run_cli(
        "run", "--run-id", "widened", "--jsonl", tmp_path / "r.jsonl", "--", "sh", "-c", SHOW_REGISTRY, "sh", registry
    )
    assert result.returncode == 0 and b"warning" not in result.stderr, result.stderr
    *names, shown_mode = result.stdout.decode().split()
    assert shown_mode == "700" and any(name.endswith(".json") for name in names), result.stdout
    assert os.stat(registry).st_mode & 0o7777 == 0o700
    assert run_cli("list").returncode == 0


@pytest.mark.parametrize("flag", EXPORTS[:1] + ["--usage-file", "--jsonl", "--detach"])
def test_another_users_fifo_at_an_output_never_blocks_the_open(tmp_path, other_user, shared, flag):
    fifo = os.path.join(shared, "planted")
    as_other(other_user, 'mkfifo -m 0666 "$1"', fifo)
    if flag == "--export-json":
        result = bench(flag, fifo)
        refused(result, "belongs to uid")
    elif flag == "--usage-file":
        result = run_cli("run", "--jsonl", tmp_path / "r.jsonl", flag, fifo, "--", "true", timeout=LIMIT)
        assert result.returncode == 0 and b"could not write the usage file" in result.stderr, result.stderr
    elif flag == "--jsonl":
        refused(run_cli("run", flag, fifo, "--", "true", timeout=LIMIT), "belongs to uid")
    else:
        refused(run_cli("run", flag, "--jsonl", fifo, "--", "true", timeout=LIMIT), "belongs to uid")


def test_another_users_fifo_with_a_reader_gets_nothing_from_a_bench_export(tmp_path, other_user, shared):
    fifo = os.path.join(shared, "planted.json")
    as_other(other_user, 'mkfifo -m 0666 "$1"', fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the attacker's reader, held open
    try:
        refused(bench("--export-json", fifo), "belongs to uid")
        assert os.read(reader, 1) == b""  # no writer has it open and nothing was written into it
    finally:
        os.close(reader)


def test_a_bench_jsonl_dir_stream_planted_as_a_fifo_does_not_block(tmp_path, other_user, shared):
    as_other(other_user, 'mkfifo -m 0666 "$1/command-1-run-1.jsonl"', shared)
    result = bench("--jsonl-dir", shared)
    assert result.returncode != 0 and b"belongs to uid" in result.stderr, (result.returncode, result.stderr)


def test_ones_own_fifo_is_a_legitimate_output_once_it_has_a_reader(tmp_path):
    fifo = tmp_path / "export.fifo"
    os.mkfifo(fifo)
    refused(bench("--export-json", fifo), "is a FIFO that no process has open for reading")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert bench("--export-json", fifo).returncode == 0
        assert json.loads(os.read(reader, 1 << 16))["results"][0]["command"] == "true"
    finally:
        os.close(reader)


def test_an_env_file_swapped_for_a_fifo_after_the_manifest_fails_its_job_not_the_batch(tmp_path, other_user, shared):
    """The env file is a regular file when the manifest is read; the first job (run as the
    attacker) replaces it with a FIFO in the attacker's directory before the second starts. That
    job fails with its reason; the batch goes on to the third."""
    theirs = os.path.join(shared, "theirs")
    env = os.path.join(theirs, "job.env")
    as_other(other_user, 'mkdir -m 0755 "$1"; echo A=1 > "$2"', theirs, env)
    swap = [*as_user(other_user), "sh", "-ec", f"rm {env}; mkfifo {env}"]
    jobs = [
        {"id": "swap", "args": swap},
        {"id": "fed", "args": ["env"], "env_file": [env]},
        {"id": "after", "args": ["true"]},
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    result = run_cli("batch", manifest, "--out", out, "--jobs", "1", timeout=LIMIT)
    lines = {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}
    assert lines["swap"]["exit_code"] == 0, result.stderr
    said = lines["fed"]["message"]  # another user's FIFO is refused before its kind is judged
    assert lines["fed"]["exit_code"] == 111 and "another user's FIFO is never read" in said, lines["fed"]
    assert lines["after"]["exit_code"] == 0


def test_report_dir_skips_a_planted_fifo_and_a_link_to_dev_zero(tmp_path, other_user, shared):
    folder = os.path.join(shared, "streams")
    os.mkdir(folder)
    os.chmod(folder, 0o1777)
    os.replace(stream(tmp_path), os.path.join(folder, "real.jsonl"))
    as_other(other_user, 'mkfifo "$1/a.jsonl"; ln -s /dev/zero "$1/z.jsonl"', folder)
    os.mkfifo(os.path.join(folder, "own.jsonl"))
    os.symlink("/dev/zero", os.path.join(folder, "own-zero.jsonl"))
    result = run_cli("report", folder, "-o", tmp_path / "index.html", timeout=LIMIT)
    assert result.returncode == 0, result.stderr
    warnings = result.stderr.decode().splitlines()
    uid = other_user.pw_uid
    assert any(f"a.jsonl is a FIFO of uid {uid}: another user's FIFO is never read" in line for line in warnings)
    assert any(f"z.jsonl is a symbolic link of uid {uid}" in line for line in warnings), warnings
    assert any("own.jsonl: it is a FIFO, not a regular file" in line for line in warnings), warnings
    assert any("own-zero.jsonl: it is a character device, not a regular file" in line for line in warnings), warnings
    assert "1 run" in result.stdout.decode()


def test_a_swapped_report_dir_entry_is_a_clear_error_not_a_hang(tmp_path):
    """Checked again where it is read: an entry that became a FIFO after the listing is refused."""
    from processkit.errors import Failure
    from processkit.report import reading

    fifo = tmp_path / "late.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(Failure, match="it is a FIFO, not a regular file"):
        reading.read_lines(str(fifo), regular=True)


def test_an_explicitly_named_fifo_stream_with_no_writer_reads_as_empty(tmp_path):
    fifo = tmp_path / "named.jsonl"
    os.mkfifo(fifo)
    result = run_cli("report", fifo, "-o", tmp_path / "p.html", timeout=LIMIT)
    assert result.returncode == 114 and b"it is empty" in result.stderr, result.stderr
