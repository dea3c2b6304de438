"""A run that lingers (``bench``'s samples: ``RunContext.linger_ms``) waits for its child's exec
in the spawn itself, as the CLI's single ``run`` does: its host carries one run at a time and the
spawn holds it for the command's exit anyway, so a loop turn for the exec's report (the report
pipe registered, waited on, dropped) is pure cost on every sample (issue 49, the 200 x
``sleep 0.02`` figure). A batch's jobs, which other jobs run beside, still yield for it.

The CLI runs in a child interpreter whose native spawn never says its exec is reported at its
first look (``Pending.ready``), so only the rule decides whether the report's channel reaches the
loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("processkit._native")
pytestmark = pytest.mark.skipif(
    os.environ.get("PROCESSKIT_SPAWN") == "python", reason="Popen's spawn waits for the exec by design"
)

HOOKED = """
import json, sys
from processkit import loop
from processkit.engine import spawn_native
from processkit.cli.main import main

begun, yielded, looked = [], set(), set()
begin, ready = spawn_native.Pending.__init__, spawn_native.Pending.ready

def recording(self, *args, **kwargs):
    begin(self, *args, **kwargs)
    if self.begun:
        begun.append(self)

def first_look_fails(self):  # the exec is never seen done at the first look
    if id(self) in looked:
        return ready(self)
    looked.add(id(self))
    return False

spawn_native.Pending.__init__ = recording
spawn_native.Pending.ready = first_look_fails
add_reader = loop.Loop.add_reader

def registering(self, fd, callback):  # a spawn's own fd, while it is pending (fd numbers are reused after)
    yielded.update(index for index, pending in enumerate(begun) if (pending.watch() or (None,))[0] == fd)
    return add_reader(self, fd, callback)

loop.Loop.add_reader = registering
try:
    code = main(sys.argv[2:])
finally:
    with open(sys.argv[1], "w") as out:
        json.dump({"spawns": len(begun), "yielded": len(yielded)}, out)
sys.exit(code)
"""


def _spawns(tmp_path, *args) -> tuple[int, int]:
    """(spawns, spawns whose exec's report the loop was given) of ``processkit-cli ARGS``."""
    log = tmp_path / "fds.json"
    done = subprocess.run(
        [sys.executable, "-c", HOOKED, str(log), *args],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(log.read_text())
    return seen["spawns"], seen["yielded"]


def test_a_bench_sample_waits_for_its_exec_in_the_spawn(tmp_path):
    spawns, yielded = _spawns(tmp_path, "bench", "-N", "--runs", "3", "--warmup", "1", "--style", "none", "true")
    assert spawns >= 4 and yielded == 0, (spawns, yielded)


def test_a_batch_job_still_yields_for_its_exec(tmp_path):
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text("".join(json.dumps({"args": ["true"], "id": f"j{n}"}) + "\n" for n in range(3)))
    spawns, yielded = _spawns(tmp_path, "batch", str(manifest), "--out", str(tmp_path / "out"), "--jobs", "2")
    assert spawns == 3 and yielded == 3, (spawns, yielded)
