"""Values of the caller's own classes in a call: a ``str`` subclass (an enum's member, a class of
``__main__``) in ``args``, ``env``, ``labels`` or ``cwd``, an ``int`` or ``float`` subclass as a
number. The spec travels to the runner service as a pickle, which names such a class by its
module; the service could not import the caller's ``__main__``, dropped the request unread, and
the call waited for ever (its ``timeout=`` too). Each is now the plain value it stands for, as
``subprocess`` hands it on."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = r"""
import enum, sys, processkit
class S(str): pass
class E(str, enum.Enum):
    A = "x"
class I(int): pass
class F(float): pass
which = sys.argv[1]
if which == "args":
    r = processkit.run(["/usr/bin/echo", S("v"), E.A], capture_output=True, timeout=F(60))
elif which == "env":
    r = processkit.run(["/usr/bin/env"], env={S("K"): E.A}, capture_output=True)
elif which == "labels":
    r = processkit.run(["/usr/bin/echo", "labelled"], labels={S("k"): E.A}, capture_output=True)
elif which == "cwd":
    r = processkit.run(["pwd"], cwd=S(sys.argv[2]), capture_output=True)
else:
    r = processkit.run(["/usr/bin/echo", "hello"], capture_output=True, capture_max_bytes=I(3))
print(r.returncode, r.stdout.decode().strip())
"""


@pytest.mark.parametrize(
    ("which", "said"),
    [("args", "0 v x"), ("env", "0 K=x"), ("labels", "0 labelled"), ("cwd", None), ("cap", "0 hel")],
)
def test_a_value_of_the_callers_own_class_runs_as_its_plain_value(which, said, tmp_path, isolated_registry):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, which, str(tmp_path)],
        capture_output=True,
        timeout=30,  # the call waited for ever before: this bound is the test's failure, not a figure
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().strip() == (said or f"0 {tmp_path}")


# A benchmark's counts and a batch job's id: the request reached the runner service as a pickle
# naming the caller's class; the service dropped it unread and closed its process's connection,
# and the call raised a bare RuntimeError ("... process ended without a reply"), no code.
SPAWNED = r"""
import sys, processkit
class S(str): pass
class I(int): pass
if sys.argv[1] == "bench":
    result = processkit.bench([["true"]], runs=I(2), warmup=I(0), ignore_failure=[I(1)])
    print("benchmarked", len(result.results))
else:
    lines = processkit.batch([{"args": ["true"], "id": S("a")}], out=sys.argv[2] + "/out")
    print(lines[0]["id"], lines[0]["exit_code"])
"""


@pytest.mark.parametrize(("which", "said"), [("bench", "benchmarked 1"), ("batch", "a 0")])
def test_a_benchmark_or_batch_value_of_the_callers_own_class_runs(which, said, tmp_path, isolated_registry):
    done = subprocess.run(
        [sys.executable, "-c", SPAWNED, which, str(tmp_path)], capture_output=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().strip() == said


# A batch's or benchmark's request the service still cannot act on (here made so by sending a
# value of the caller's own class past the library's plain values): the service answers it by its
# id on the call's connection, where the call threw that answer away and raised a bare
# RuntimeError ("... process ended without a reply", no code, no reason).
DROPPED = r"""
import sys, processkit
from processkit.api import shared
from processkit.errors import Failure
class S(str): pass
class I(int): pass
plain = shared.send

def send(kind, *payload, **given):
    if kind == "batch":  # its working directory
        payload = (*payload[:2], S(payload[2]), *payload[3:])
    elif kind == "bench":  # its count of descriptors
        payload = (payload[0], I(payload[1]))
    return plain(kind, *payload, **given)

shared.send = send
try:
    if sys.argv[1] == "bench":
        processkit.bench([["true"]], runs=2, warmup=0)
    else:
        processkit.batch([{"args": ["true"], "id": "a"}], out=sys.argv[2] + "/out")
except Failure as failure:
    print(failure.code, failure.message)
processkit.run(["true"])
"""


@pytest.mark.parametrize("which", ["bench", "batch"])
def test_a_batch_or_benchmark_request_the_service_drops_raises_its_failure(which, tmp_path, isolated_registry):
    done = subprocess.run(
        [sys.executable, "-c", DROPPED, which, str(tmp_path)], capture_output=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    said = done.stdout.decode()
    assert said.startswith("104 ") and said.count("\n") == 1, said
    assert "the runner service could not read its request" in said, said
