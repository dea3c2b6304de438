"""What a cut capture says it kept (threat59, attack e): ``CaptureInfo.kept`` names the stream's
byte ranges the capture holds. A ``tail`` or ``head-tail`` capture the runner service kept in its
scratch directory (no ``capture_dir=``) said it held the stream's first bytes, ``((0, cap),)``,
while ``stdout`` held its last: the scratch's layout record was gone by the time the caller read
it. The service now sends the ranges the run kept with its reply. Each through the real service."""

from __future__ import annotations

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
