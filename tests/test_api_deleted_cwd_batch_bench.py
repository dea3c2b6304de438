"""``processkit.batch()`` and ``processkit.bench()`` from a removed working directory: each
names it as ``run()`` does (through this process's /proc entry), and fails as its CLI
counterpart does there (a job's 111, the benchmark's ``Failure``, both saying the working
directory cannot be read), never a raw FileNotFoundError from ``getcwd``. Nothing is written:
the jobs' command only reads."""

from __future__ import annotations

import json
import subprocess
import sys

PY = sys.executable

BATCH = r"""
import json, os, sys, processkit
out = sys.argv[2]
os.chdir(sys.argv[1])
os.rmdir(sys.argv[1])
lines = processkit.batch([{"id": "a", "args": ["stat", "-L", "-c", "%i", "."]}], out=out, jobs=1)
print(json.dumps([[line["exit_code"], line["message"]] for line in lines]))
"""

BENCH = r"""
import json, os, sys, processkit
os.chdir(sys.argv[1])
os.rmdir(sys.argv[1])
try:
    processkit.bench([["true"]], runs=2, warmup=0)
except Exception as failure:  # noqa: BLE001 - the Failure value, by its code
    print(json.dumps([type(failure).__name__, getattr(failure, "code", None), str(failure)]))
"""


def _gone(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    return gone


MESSAGE = "could not resolve the runner's current directory"


def test_batch_from_a_removed_working_directory_fails_its_jobs_in_one_line(tmp_path):
    gone = _gone(tmp_path)
    out = tmp_path / "out"
    done = subprocess.run([PY, "-c", BATCH, str(gone), str(out)], capture_output=True, timeout=120)
    assert b"FileNotFoundError" not in done.stderr, done.stderr.decode()
    assert done.returncode == 0, done.stderr.decode()
    ((code, error),) = json.loads(done.stdout)
    assert code == 111 and MESSAGE in error and "\n" not in error


def test_bench_from_a_removed_working_directory_fails_in_one_line(tmp_path):
    gone = _gone(tmp_path)
    done = subprocess.run([PY, "-c", BENCH, str(gone)], capture_output=True, timeout=120)
    assert b"FileNotFoundError" not in done.stderr, done.stderr.decode()
    assert done.returncode == 0, done.stderr.decode()
    kind, code, message = json.loads(done.stdout)
    assert kind == "Failure" and code not in (None, 0) and MESSAGE in message and "\n" not in message


UP = r"""
import json, os, sys, processkit
os.chdir(sys.argv[1])
os.rmdir(sys.argv[1])
lines = processkit.batch([{"id": "a", "args": ["true"]}], out="../out", jobs=1)
print(json.dumps([line["exit_code"] for line in lines]))
"""


def test_batch_out_above_a_removed_working_directory_is_the_kernels_to_resolve(tmp_path):
    """``out="../out"`` goes through the /proc entry as the kernel resolves it (the removed
    directory's parent); before, ``normpath`` folded "/proc/PID/cwd/.." into "/proc/PID"."""
    gone = _gone(tmp_path)
    done = subprocess.run([PY, "-c", UP, str(gone)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == [111]
    assert (tmp_path / "out" / "summary.jsonl").is_file()
