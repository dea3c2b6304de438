"""A batch's summary is locked for the batch's life (``recorder._open_summary``); a batch whose
set-up failed after the lock was taken (``--resume`` on a summary it cannot read, a set-up step
of ``run_batch`` or of the Dask path's ``run_on_dask`` after its recorder) held it until its process ended, so another batch into the
same ``--out`` in that process was refused as "another batch is writing into it now". Every
caller exits after such a failure today (the CLI, the batch process of ``processkit.batch``), so
this is seen in a process of its own that goes on after the failure, with the real lock."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import SAFETY_NET

FAILED_THEN_AGAIN = r"""
import json, os, sys
from processkit.batching import on_host
from processkit.batching.recorder import Recorder
from processkit.errors import Failure, Kind

out = sys.argv[1]
said = []

def again():
    try:
        Recorder(out, []).close()
        said.append("free")
    except Failure as failure:
        said.append(failure.message)

os.makedirs(out)
with open(os.path.join(out, "summary.jsonl"), "wb") as summary:
    summary.write(b"x" * (2 << 20))  # a line past the reader's bound: --resume cannot read it
try:
    Recorder(out, [], resume=True)
except Failure:
    pass
again()

def lost():
    raise Failure(Kind.SETUP, "the batch's working directory is gone")

on_host._own_context = lost  # a set-up step after the recorder is made
try:
    on_host.run_batch([], on_host.Settings(out))
except Failure:
    pass
again()

from processkit.batching import fleet

class Client:  # what run_on_dask asks of a client before its first task
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.close()
    def close(self):
        pass

fleet.connect = lambda address: Client()
fleet.worker_settings = lambda settings, out: lost()  # the Dask path's set-up step after its recorder
try:
    fleet.run_on_dask("tcp://nowhere:1", [], on_host.Settings(out))
except Failure:
    pass
again()
print(json.dumps(said))
"""


def test_a_batch_whose_set_up_failed_lets_its_summary_go(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", FAILED_THEN_AGAIN, str(tmp_path / "out")], capture_output=True, timeout=SAFETY_NET
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["free", "free", "free"]
