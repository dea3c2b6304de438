"""A ``--dask-scheduler`` batch under ``--error-format json``: stderr is the envelope alone, which a
CI reader parses as one JSON document. A result Dask could not gather from its worker at the first
ask had the client's own logger (``distributed.client``) write ``Couldn't gather 1 keys,
rescheduling ...`` to stderr ahead of the envelope, and the reader failed on it. Dask's log stays
off stderr in JSON mode now. A real ``LocalCluster`` whose one worker fails its first ``get_data``
(the scheduler's gather of the finished task's result), the real ``processkit-cli``."""

from __future__ import annotations

import json

import pytest

from conftest import SAFETY_NET, reaped, start_cli
from local_cluster import local_cluster

distributed = pytest.importorskip("distributed")


def _fail_first_gather(dask_worker) -> None:
    """The worker's next ``get_data`` request fails (as a worker whose reply was lost); later
    ones are served again, so Dask's retry gathers the result."""
    served = dask_worker.handlers["get_data"]

    def failing(*args, **kwargs):
        dask_worker.handlers["get_data"] = served
        raise RuntimeError("a gather that failed once")

    dask_worker.handlers["get_data"] = failing


def _batch(tmp_path, *flags) -> tuple[int, bytes]:
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out"
    manifest.write_text(json.dumps({"id": "failed", "args": ["sh", "-c", "exit 3"]}) + "\n")
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        with distributed.Client(cluster.scheduler_address) as client:
            client.run(_fail_first_gather)
        batch = start_cli(
            *flags, "batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address, cwd=tmp_path
        )
        with reaped(batch):
            _, err = batch.communicate(timeout=SAFETY_NET)
    return batch.returncode, err


def test_dasks_own_log_line_stays_off_the_json_envelopes_stderr(tmp_path):
    code, err = _batch(tmp_path, "--error-format", "json")
    assert code == 117, err
    envelope = json.loads(err)  # one document: nothing of Dask's before it
    assert envelope["message"].startswith("0 of 1 job exited 0, 1 failed"), envelope


def test_without_json_the_line_is_dasks_as_before(tmp_path):
    """The human format keeps Dask's line (what a user of Dask reads of a lost result)."""
    code, err = _batch(tmp_path)
    assert code == 117, err
    assert b"Couldn't gather 1 keys, rescheduling" in err, err


def test_dasks_version_warning_stays_off_the_json_envelopes_stderr(tmp_path, monkeypatch):
    """Dask's ``VersionMismatchWarning`` (a Python warning, not a log record: a client whose
    packages differ from its cluster's, common in CI) also reached stderr ahead of the envelope.
    The scheduler here, in this process, says it has another ``msgpack`` when a client registers."""
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out"
    manifest.write_text(json.dumps({"id": "failed", "args": ["sh", "-c", "exit 3"]}) + "\n")
    versions = distributed.versions.get_versions

    def other_msgpack(*args, **kwargs):
        found = versions(*args, **kwargs)
        found["packages"]["msgpack"] = "0.0.1"
        return found

    with local_cluster(n_workers=1, threads_per_worker=1, processes=True) as cluster:
        monkeypatch.setattr(distributed.versions, "get_versions", other_msgpack)
        flags = ("batch", manifest, "--out", out, "--dask-scheduler", cluster.scheduler_address)
        told = start_cli(*flags, cwd=tmp_path)
        with reaped(told):
            _, human = told.communicate(timeout=SAFETY_NET)
        assert b"Mismatched versions" in human, human  # the cluster does tell it
        batch = start_cli("--error-format", "json", *flags, cwd=tmp_path)
        with reaped(batch):
            _, err = batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == 117, err
    assert json.loads(err)["message"].startswith("0 of 1 job exited 0, 1 failed"), err
