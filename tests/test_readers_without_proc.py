"""Readers where there is no ``/proc`` (a container or chroot without one, a mount namespace
that left it out): an input judged by its ``O_PATH`` handle was opened again through
``/proc/self/fd/N``, so ``events --file`` and ``report`` of an existing stream failed "No such
file or directory" (and ``report -o /dev/null`` could not write). It is now opened again by its
name in the directory that was walked, refused unless it is the very file judged. The write
check of a report (``batch --junit``) is asked of the judged handle through ``/proc``, by name
without it, and never so that glibc answers from mode bits (a kernel without ``faccessat2``).
Skipped without root or where ``unshare --mount`` is refused."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import cli_command, run_cli
from own_tmp import PRIVATE_MOUNTS

LIMIT = 120
NO_FACCESSAT2 = ["strace", "-qq", "-o", os.devnull, "-e", "trace=faccessat2", "-e", "inject=faccessat2:error=ENOSYS"]


@pytest.fixture(scope="module")
def without_proc() -> list[str]:
    """A new mount namespace with ``/proc`` unmounted, probed once."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    prefix = [*PRIVATE_MOUNTS, "sh", "-c", 'umount -l /proc && exec "$@"', "sh"]
    probe = subprocess.run([*prefix, "test", "!", "-e", "/proc/self"], capture_output=True, timeout=LIMIT)
    if probe.returncode != 0:
        pytest.skip(f"/proc cannot be left out here: {probe.stderr.decode(errors='replace')}")
    return prefix


@pytest.fixture
def stream(tmp_path) -> str:
    path = str(tmp_path / "run.jsonl")
    made = run_cli("run", "--jsonl", path, "--run-id", "no-proc-run", "--", "true", timeout=LIMIT)
    assert made.returncode == 0, made.stderr
    return path


def _without(prefix: list[str], *args) -> subprocess.CompletedProcess:
    command = [*prefix, *cli_command(), *map(str, args)]
    return subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=LIMIT)


def test_events_reads_a_stream_without_proc(without_proc, stream):
    done = _without(without_proc, "events", "--validate", "--file", stream)
    assert done.returncode == 0 and b"all valid" in done.stdout, done.stderr
    shown = _without(without_proc, "events", "--file", stream)
    assert shown.returncode == 0 and b"runner_exit" in shown.stdout, shown.stderr


def test_report_draws_a_stream_and_a_directory_without_proc(without_proc, stream, tmp_path):
    page = tmp_path / "page.html"
    for given in (stream, tmp_path):
        done = _without(without_proc, "report", given, "-o", page)
        assert done.returncode == 0, done.stderr
        assert "no-proc-run" in page.read_text()
        page.unlink()
    into_device = _without(without_proc, "report", stream, "-o", "/dev/null")
    assert into_device.returncode == 0, into_device.stderr


def _batch(tmp_path) -> tuple:
    """A batch whose jobs run on a Dask cluster: refused at its manifest (100) once its reports'
    places passed their checks (111 otherwise)."""
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text('{"id": "a"}\n')
    return ("batch", manifest, "--out", tmp_path / "out", "--dask-scheduler", "tcp://127.0.0.1:9", "--junit")


def _read_only(prefix: list[str], tmp_path) -> list[str]:
    """``prefix`` with ``tmp_path/frozen`` (made, holding ``report.xml``) bound read-only on itself."""
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    (frozen / "report.xml").write_bytes(b"")
    return [*prefix, "sh", "-c", 'mount --bind -o ro "$1" "$1" && shift && exec "$@"', "sh", str(frozen)]


def test_batch_checks_its_reports_without_proc(without_proc, tmp_path):
    """``batch --junit FILE`` whose jobs run on a Dask cluster (nothing here needs ``/proc``):
    the report's place is checked by its entry in the directory walked, not through
    ``/proc/self/fd/N`` (``--junit /dev/null`` was "not writable", 111). A file on a read-only
    mount is still refused."""
    batch = _batch(tmp_path)
    done = _without(without_proc, *batch, "/dev/null")
    assert done.returncode == 100 and b"manifest line 1" in done.stderr, done.stderr
    refused = _without(_read_only(without_proc, tmp_path), *batch, tmp_path / "frozen/report.xml")
    assert refused.returncode == 111 and b"report.xml is not writable" in refused.stderr, refused.stderr


@pytest.fixture(params=["with /proc", "without /proc"])
def mounts(request) -> list[str]:
    """A new mount namespace, with ``/proc`` or without it."""
    if request.param == "without /proc":
        return request.getfixturevalue("without_proc")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    return list(PRIVATE_MOUNTS)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace(1) to make faccessat2 missing")
def test_batch_refuses_a_read_only_report_without_faccessat2(mounts, tmp_path):
    """Where the kernel has no ``faccessat2`` (before 5.8; strace makes it fail ``ENOSYS``),
    glibc answers an access check asked with ``AT_SYMLINK_NOFOLLOW`` from the mode bits: root
    was let write a report on a read-only mount (the batch went on, 100). The check asks with no
    flags, so the kernel answers (111), with ``/proc`` and without it."""
    without_faccessat2 = [*_read_only(mounts, tmp_path), *NO_FACCESSAT2]  # the batch's own process checks
    refused = _without(without_faccessat2, *_batch(tmp_path), tmp_path / "frozen/report.xml")
    assert refused.returncode == 111 and b"report.xml is not writable" in refused.stderr, refused.stderr
