"""A codec that does not exist is refused before the run starts, as ``subprocess.Popen`` refuses
it: ``start`` sent the request first and met the codec making the caller's file objects, so the
child ran on with no handle and the caller's pipe ends stayed open; ``run`` ran the child, then
raised."""

from __future__ import annotations

import os
import subprocess

import pytest

import processkit


@pytest.mark.parametrize("keywords", [{"encoding": "no-such-codec"}, {"errors": "no-such-handler"}])
@pytest.mark.parametrize("call", ["run", "start"])
def test_an_unknown_codec_starts_no_child_and_leaves_no_descriptor(tmp_path, call, keywords):
    marker = tmp_path / "ran"
    processkit.run(["true"])  # the service started, its descriptors counted in ``before``
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(LookupError):
        if call == "run":
            processkit.run(["touch", str(marker)], capture_output=True, **keywords)
        else:
            processkit.start(["touch", str(marker)], stdout=subprocess.PIPE, **keywords)
    processkit.run(["true"])  # a call after it: the service carried no run of the refused one
    assert not marker.exists()
    assert len(os.listdir("/proc/self/fd")) <= before
