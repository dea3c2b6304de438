"""Fan-out through Dask distributed: processkit.run as the task of a real LocalCluster (scheduler and
two worker processes over localhost TCP). Every digest is checked against its file, and the
workers are shown to keep nothing: no runner processes, no run cgroups, no registry entries."""

from __future__ import annotations

import glob
import hashlib
import os
import sys

import pytest

import processkit
from local_cluster import local_cluster

distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")

TASKS = 32


def worker_leftovers(runner_pids: list[int]) -> dict:
    """Runs on a worker: what the runs it executed left behind on it. The worker keeps its one
    runner service (started by its first task, ended with the worker), carrying no run."""
    import psutil

    from processkit.containment import cgroup_v2

    mine = psutil.Process()
    services = [child for child in mine.children() if "processkit.service.serve" in " ".join(child.cmdline())]
    runners = [
        child.pid
        for child in mine.children(recursive=True)
        if any("processkit" in part for part in child.cmdline()) and child not in services
    ]
    carried = [grandchild.pid for service in services for grandchild in service.children(recursive=True)]
    parent = cgroup_v2.find_parent()
    groups = (
        []
        if parent is None
        else [path for pid in runner_pids for path in glob.glob(os.path.join(parent, f"processkit-{pid}-*"))]
    )
    registry = os.environ.get("PROCESSKIT_CLI_REGISTRY_DIR")
    # Records and locks of runs, which a run removes: the service's own lodging record stays as
    # long as the service (its outcome files, *.ended and *.outcomes, stay on purpose).
    entries = sorted(
        name
        for name in os.listdir(registry)
        if not name.endswith((".ended", ".outcomes")) and not _lodging_record(registry, name)
    )
    return {
        "services": len(services),
        "runners": runners,
        "carried": carried,
        "groups": groups,
        "registry": registry,
        "entries": entries,
    }


def _lodging_record(registry: str, name: str) -> bool:
    """Whether ``name`` is the record (or its lock) of a worker's service's lodging (the two
    workers share the registry)."""
    import json

    stem = os.path.join(registry, name.rsplit(".", 1)[0] + ".json")
    try:
        with open(stem) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return False
    return record.get("hint") == "batch" and record.get("labels", {}).get("batch", "").startswith("api-")


@pytest.fixture
def cluster(isolated_registry):
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with (
        local_cluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            protocol="tcp",
            env={"PROCESSKIT_CLI_REGISTRY_DIR": str(isolated_registry)},
        ) as local,
        distributed.Client(local) as client,
    ):
        yield client
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_fan_out_32_captured_runs_over_a_local_cluster(cluster, tmp_path, isolated_registry):
    workers = cluster.scheduler_info()["workers"]
    assert len(workers) == 2 and all(address.startswith("tcp://127.0.0.1:") for address in workers)
    futures = [
        cluster.submit(
            processkit.run,
            ["sh", "-c", f"yes {index} | head -c {1000 + index}; printf e{index} >&2"],
            capture_dir=str(tmp_path / f"task-{index}"),
            labels={"task": str(index)},
            timeout="1m",
            pure=False,
        )
        for index in range(TASKS)
    ]
    results = cluster.gather(futures)
    assert len({result.run_id for result in results}) == TASKS
    for index, result in enumerate(results):
        assert (result.returncode, result.source) == (0, "child_exit"), result.diagnostics
        assert result.events[0].labels == {"task": str(index)}
        expected = (f"{index}\n".encode() * 1000)[: 1000 + index]
        for capture, content in ((result.stdout_capture, expected), (result.stderr_capture, f"e{index}".encode())):
            with open(capture.path, "rb") as handle:
                on_disk = handle.read()
            assert on_disk == content
            assert capture.sha256 == hashlib.sha256(on_disk).hexdigest()
            assert capture.bytes_seen == capture.bytes_written == len(content) and not capture.truncated
    runner_pids = sorted({result.runner_pid for result in results})
    assert len(runner_pids) <= 2, "one runner service per worker process carried its runs"
    leftovers = cluster.run(worker_leftovers, runner_pids)
    assert len(leftovers) == 2
    for report in leftovers.values():
        assert report["services"] <= 1
        del report["services"]
        assert report == {"runners": [], "carried": [], "groups": [], "registry": str(isolated_registry), "entries": []}
    assert processkit.runs() == []
