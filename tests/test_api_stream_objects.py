"""A file object given as a stream and held by nothing but the call's keyword
(``stdin=open(path)``, as ``subprocess.run`` takes it) reaches the child. Before, the call let it
go once it had its descriptor's number, so it was closed, and the number went to the next
descriptor opened: on a process's first call, its connection to the runner service, so the
child read the service's replies (the call hung) or wrote into its requests (the service
ended)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PY = sys.executable

FIRST_CALL = {
    "stdin": "result = processkit.run(['cat'], stdin=open(path, 'rb'), capture_output=True, timeout=60)\n"
    "print(json.dumps([result.returncode, result.stdout.decode()]))\n",
    "stdout": "result = processkit.run(['echo', 'written'], stdout=open(path, 'wb'), timeout=60)\n"
    "print(json.dumps([result.returncode, open(path).read()]))\n",
}


@pytest.mark.parametrize("stream", sorted(FIRST_CALL))
def test_a_file_object_only_the_keyword_holds_is_the_childs_stream(tmp_path, stream):
    path = tmp_path / "data"
    path.write_text("written\n")
    script = "import json, sys, processkit\npath = sys.argv[1]\n" + FIRST_CALL[stream]
    done = subprocess.run([PY, "-c", script, str(path)], capture_output=True, timeout=90)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert json.loads(done.stdout) == [0, "written\n"]
