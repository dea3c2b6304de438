"""What a cut capture says it kept (threat59, attack e): ``CaptureInfo.kept`` names the stream's
byte ranges the capture holds. A ``tail`` or ``head-tail`` capture the runner service kept in its
scratch directory (no ``capture_dir=``) said it held the stream's first bytes, ``((0, cap),)``,
while ``stdout`` held its last: the scratch's layout record was gone by the time the caller read
it. The service now sends the ranges the run kept with its reply. Each through the real service."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

import processkit

STREAM = b"".join(b"%d" % (index % 10) for index in range(3000)) + b"END"
COMMAND = [
    "python3",
    "-c",
    "import sys; sys.stdout.buffer.write(b''.join(b'%d' % (i % 10) for i in range(3000)) + b'END')",
]
EXPECTED = {"tail": ((2983, 3003),), "head-tail": ((0, 10), (2993, 3003)), "head": ((0, 20),)}


@pytest.mark.parametrize("keep", sorted(EXPECTED))
@pytest.mark.parametrize("where", ["scratch", "jsonl", "capture_dir"])
def test_a_cut_capture_names_the_ranges_it_holds(keep, where, tmp_path):
    keywords = {"jsonl": str(tmp_path / "run.jsonl")} if where == "jsonl" else {}
    if where == "capture_dir":
        keywords["capture_dir"] = str(tmp_path / "cap")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", processkit.CaptureTruncated)
        done = processkit.run(COMMAND, capture_output=True, capture_keep=keep, capture_max_bytes=20, **keywords)
    capture = done.stdout_capture
    assert capture is not None and capture.truncated and capture.bytes_seen == len(STREAM)
    assert capture.kept == EXPECTED[keep]
    assert done.stdout == b"".join(STREAM[start:end] for start, end in capture.kept)


CARRIED = r"""
import json, os, sys
from processkit.api import wire
from processkit.engine import runner
from processkit.engine.host import Host
from processkit.context import RunContext
from processkit.spec import RunSpec

placed, where, command = sys.argv[1] == "placed", sys.argv[2], json.loads(sys.argv[3])
spec = RunSpec(
    argv=command, jsonl=where + ".jsonl", capture_dir=wire.SCRATCH_CAPTURE if placed else where,
    capture_keep="tail", capture_max_bytes=20, run_id="r", run_id_given=True,
)
host = Host(watch=False)
try:
    outcome = host.carry(runner.steps(host, spec, context=RunContext(places={wire.SCRATCH_CAPTURE: where})))
finally:
    host.close()
print("\n" + json.dumps([outcome.code, outcome.kept["stdout"]]))  # after the echoed stream
sys.stdout.flush()
os._exit(0)
"""


@pytest.mark.parametrize("placed", ["placed", "named"])
def test_a_ring_capture_in_a_carriers_place_writes_no_record_it_never_reads(placed, tmp_path):
    """The runner service sends a ring's kept ranges with its reply and removes its scratch
    capture unread: the layout record (live and final) is written only where the capture
    directory is the one the spec names (a caller's, which later readers find), never in the
    carrier's own place. In a process of its own, as the service carries it."""
    where = tmp_path / "cap"
    done = subprocess.run(
        [sys.executable, "-c", CARRIED, placed, str(where), json.dumps(COMMAND)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout.splitlines()[-1]) == [0, [list(pair) for pair in EXPECTED["tail"]]]
    assert (where / "capture-keep.json").exists() is (placed == "named")
