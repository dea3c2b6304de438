"""A dead run's control socket in ``$TMPDIR``: the reference makes its socket's directory there
where ``/tmp`` cannot hold it, and its ``prune`` reaps an endpoint in either; so does this one.
A relative ``$TMPDIR`` is no base, and a relative endpoint is never reaped (the reference's rule)."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from pathlib import Path

from control_support import cli_json, json_out
from control_support import registry_record as _record
from conftest import run_cli
from processkit import rundir, rundir_shape


def test_prune_reaps_a_dead_runs_socket_directory_in_tmpdir(isolated_registry, monkeypatch):
    tmpdir = Path(tempfile.mkdtemp(prefix="pk", dir="/tmp"))  # short: a socket's address has 108 bytes
    try:
        monkeypatch.setenv("TMPDIR", str(tmpdir))
        run_dir = tmpdir / "pkc-4242-18ef1e15f08fdf82-0"  # the reference's shape: its socket alone
        run_dir.mkdir(mode=0o700)
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(run_dir / "c.sock"))
        record = _record("dead", "dead.lock", endpoint=f"{run_dir}/c.sock")
        (isolated_registry / "dead.json").write_text(json.dumps(record))
        (isolated_registry / "dead.lock").touch()
        preview = cli_json("prune", "--dry-run", "--json")
        assert [c["socket_dir"] for c in preview["candidates"]] == [str(run_dir)]
        assert cli_json("prune", "--json") == {"pruned": 1, "live": 0, "unprobed": 0, "orphaned_locks": 0}
        assert not run_dir.exists()
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def test_prune_takes_no_socket_under_a_relative_tmpdir(isolated_registry, monkeypatch):
    # A relative $TMPDIR names another place from every directory prune may run in: the
    # reference's endpoint rule wants it absolute, so no base is made of it and no endpoint under it reaped.
    here = Path(tempfile.mkdtemp(prefix="pk", dir="/tmp"))  # short: a socket's address has 108 bytes
    try:
        monkeypatch.setenv("TMPDIR", "rel")
        run_dir = here / "rel" / "pkc-4242-18ef1e15f08fdf82-0"
        run_dir.mkdir(parents=True, mode=0o700)
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(run_dir / "c.sock"))
        record = _record("dead", "dead.lock", endpoint="rel/pkc-4242-18ef1e15f08fdf82-0/c.sock")
        (isolated_registry / "dead.json").write_text(json.dumps(record))
        (isolated_registry / "dead.lock").touch()
        preview = json_out(run_cli("prune", "--dry-run", "--json", cwd=here))
        assert [c["socket_dir"] for c in preview["candidates"]] == [None], preview
        assert json_out(run_cli("prune", "--json", cwd=here))["pruned"] == 1
        assert (run_dir / "c.sock").exists()
    finally:
        shutil.rmtree(here, ignore_errors=True)


def test_a_relative_endpoint_is_never_reapable_whatever_the_bases(monkeypatch):
    # The reference's endpoint rule on its own, as ``shaped`` has it: absolute first, so a
    # relative base (were one ever listed) names nothing prune acts on.
    monkeypatch.setattr(rundir_shape, "bases", lambda: ["/tmp", "rel"])
    assert rundir_shape.reapable_dir("rel/pkc-4242-18ef1e15f08fdf82-0/c.sock") is None
    assert rundir_shape.reapable_dir("/tmp/pkc-4242-18ef1e15f08fdf82-0/c.sock") == "/tmp/pkc-4242-18ef1e15f08fdf82-0"


def test_tmpdir_is_a_base_once_however_it_is_spelt(monkeypatch):
    # ``/tmp/`` is ``/tmp``: listed twice, every reaper would look there twice.
    monkeypatch.setenv("TMPDIR", "/tmp/")
    assert rundir.bases().count("/tmp") == 1 and "/tmp/" not in rundir.bases()


def test_a_tmpdir_others_could_rename_from_is_no_base(monkeypatch, tmp_path):
    """The trust rule itself, where the full-``/tmp`` process tests cannot run (a checkout under
    ``/tmp`` skips them): a world-writable directory without the sticky bit, or this user's own
    0755 one, is taken as ``/tmp``; this user's own 0700 one is the platform's base."""
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    readable = tmp_path / "readable"
    readable.mkdir()
    readable.chmod(0o755)  # not by mkdir's mode: the umask would narrow it
    private = tmp_path / "private"
    private.mkdir()
    private.chmod(0o700)
    for judged, taken in ((open_to_all, "/tmp"), (readable, "/tmp"), (private, str(private))):
        monkeypatch.setenv("TMPDIR", str(judged))
        assert rundir.temp_dir() == taken, judged
        assert (str(judged) in rundir.bases()) is (taken != "/tmp"), judged
