"""A dead run's control socket in ``$TMPDIR``: the reference makes its socket's directory there
where ``/tmp`` cannot hold it, and its ``prune`` reaps an endpoint in either; so does this one."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from pathlib import Path

from control_support import cli_json
from control_support import registry_record as _record


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
