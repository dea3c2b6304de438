"""The caller's umask (threat59, attack b): the runner service is started once, at a process's
first call, and made every run's files (its capture directory and files, its stream) and its
child, and the process of a ``processkit.batch`` or ``bench``, under the umask the caller had
*then*. A caller that later tightened it (``os.umask(0o077)``) to keep a run's output from other
users got ``0644`` files and a child running under ``022``, where ``subprocess`` and
``processkit-cli`` give ``0600`` and ``077``. A request now carries the caller's umask when it
changed, and the service makes the run's child and the files at the paths its caller named under
it (``engine.callers_umask``), its own scratch under its own. Through the real service, in a
process of its own (the umask is the whole process's)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from privileges import without_file_override

SCRIPT = r"""
import json, os, stat, sys
import processkit

out = sys.argv[1]
os.umask(0o022)
processkit.run(["true"])  # the service starts under 022
found = {}
for mask in (0o077, 0o022):
    os.umask(mask)
    where = os.path.join(out, oct(mask))
    done = processkit.run(
        ["sh", "-c", "umask; : > made"], cwd=out, capture_dir=os.path.join(where, "cap"), jsonl=where + ".jsonl"
    )
    modes = {
        name: oct(stat.S_IMODE(os.stat(path).st_mode))
        for name, path in (("dir", os.path.join(where, "cap")), ("stdout", os.path.join(where, "cap", "stdout.log")),
                           ("jsonl", where + ".jsonl"), ("made", os.path.join(out, "made")))
    }
    os.unlink(os.path.join(out, "made"))
    with open(os.path.join(where, "cap", "stdout.log")) as handle:
        modes["child"] = handle.read().strip()
    found[oct(mask)] = [done.returncode, modes]
os.umask(0o077)  # a batch and a benchmark: each in a process the service starts
batch = os.path.join(out, "batch")
processkit.batch([{"id": "j", "args": ["sh", "-c", "umask"]}], out=batch)
os.chdir(out)
processkit.bench([["sh", "-c", "umask > bench-umask"]], runs=1, warmup=0)
with open(os.path.join(batch, "j", "capture", "stdout.log")) as handle, open("bench-umask") as made:
    found["others"] = {
        "batch": handle.read().strip(),
        "summary": oct(stat.S_IMODE(os.stat(os.path.join(batch, "summary.jsonl")).st_mode)),
        "bench": made.read().strip(),
        "bench file": oct(stat.S_IMODE(os.stat("bench-umask").st_mode)),
    }
print(json.dumps(found))
"""


def test_each_run_is_made_under_the_callers_umask_of_the_call(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True
    )
    found = json.loads(done.stdout.splitlines()[-1])
    private = {"dir": "0o700", "stdout": "0o600", "jsonl": "0o600", "made": "0o600", "child": "0077"}
    assert found["0o77"] == [0, private]
    shared = {"dir": "0o755", "stdout": "0o644", "jsonl": "0o644", "made": "0o644", "child": "0022"}
    assert found["0o22"] == [0, shared], "a loosened umask travels as well"
    assert found["others"] == {"batch": "0077", "summary": "0o600", "bench": "0077", "bench file": "0o600"}


OWN_FILES = r"""
import json, os, stat, subprocess, sys, warnings
import processkit

out, start = sys.argv[1], int(sys.argv[2], 8)
os.umask(start)
first = processkit.run(["sh", "-c", "umask"], capture_output=True)  # the service starts under it
found = {"first": [first.returncode, first.stdout.decode().strip()]}
for mask in sys.argv[3:]:
    os.umask(int(mask, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", processkit.CaptureTruncated)
        ring = processkit.run(
            ["sh", "-c", "umask >&2; echo 0123456789abcdefghijklmnopqrstuvwxyz"],
            capture_output=True, capture_keep="tail", capture_max_bytes=20,
        )
    with processkit.start(["sh", "-c", "umask"], stdout=subprocess.PIPE) as handle:  # its stream followed live
        started = [handle.stdout.read().decode().strip(), handle.wait()]
    found[mask] = [ring.returncode, ring.stdout.decode(), ring.stderr.decode().strip(), started]
os.umask(0o277)
named, made = os.path.join(out, "named.jsonl"), os.path.join(out, "made")
done = processkit.run(["sh", "-c", "umask > made"], cwd=out, jsonl=named)
refused = processkit.run(["true"], capture_dir=os.path.join(out, "cap"))  # made 0500, as the CLI makes it
mode = lambda path: oct(stat.S_IMODE(os.stat(path).st_mode))
found["named"] = [done.returncode, bool(done.events), mode(named), mode(made), refused.returncode]
print(json.dumps(found))
"""


@pytest.mark.parametrize("start, masks", [("022", ["277", "700"]), ("277", ["277", "777"])])
def test_the_services_own_files_take_no_umask(tmp_path, start, masks):
    """A umask that takes the owner's bits (``0o277``, ``0o700``, ``0o777``) is the caller's: each
    child runs under it and each file at a path the caller named is made under it (as
    ``processkit-cli`` makes them: a capture directory made ``0500`` refuses its files, 111).
    The service's own scratch keeps its own modes, whatever umask the caller had at its first
    call (the service started under it): a ring capture with no ``capture_dir=`` (the directory
    the service makes in its scratch; 111 naming a directory the user never gave, or its
    capture lost) and a stream ``start`` follows live (PermissionError, 111) still work. Root
    is run without its override of file modes, as any other user is."""
    done = subprocess.run(
        [*without_file_override(), sys.executable, "-c", OWN_FILES, str(tmp_path), start, *masks],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    tail = "hijklmnopqrstuvwxyz\n"
    expected = {mask: [0, tail, f"0{mask}", [f"0{mask}", 0]] for mask in masks}
    assert found == {"first": [0, f"0{start}"], **expected, "named": [0, True, "0o400", "0o400", 111]}
