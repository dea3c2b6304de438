"""A caller whose hard open-file limit is too low for its runner service to hold its own files
(``ulimit -n 8`` to 15) is told so at once, the limit named, with the set-up failure's code: at 8
and 9 the service said its hello, then ended at whichever import came first (EMFILE), and every
call raised ``ServiceGone`` ("the runner service of this process has ended"), naming no limit; at
10 to 15 every call returned a 111 result (now the refusal: an exception). From 16 to about 70 the
service starts and each call is its own 111 "no room" result, as before. A caller that runs out
of descriptors as it starts its service is told the limit too."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

CALLER = r"""
import json, processkit
from processkit.api.service import ServiceUnstartable

try:
    result = processkit.run(["true"])
    print(json.dumps({"returncode": result.returncode, "source": result.source}))
except ServiceUnstartable as exc:
    print(json.dumps({"raised": type(exc).__name__, "code": exc.code, "said": str(exc)}))
"""


def _limited(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


@pytest.mark.parametrize("limit", [8, 9, 11, 15])
def test_a_limit_below_what_the_service_keeps_is_refused_at_once_naming_it(tmp_path, limit):
    done = subprocess.run(
        [sys.executable, "-c", CALLER], capture_output=True, timeout=120, cwd=tmp_path, preexec_fn=_limited(limit)
    )
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen == {
        "raised": "ServiceUnstartable",
        "code": 111,
        "said": f"the open-file limit (ulimit -n: {limit}) is below the 16 files the runner service keeps "
        "for itself; raise the limit",
    }


def test_a_limit_the_service_starts_under_is_each_calls_own_setup_failure(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", CALLER], capture_output=True, timeout=120, cwd=tmp_path, preexec_fn=_limited(16)
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == {"returncode": 111, "source": "setup"}


@pytest.mark.parametrize("limit", [8, 16])
def test_the_clis_run_under_the_same_limits_says_one_line(tmp_path, limit):
    done = subprocess.run(
        [sys.executable, "-m", "processkit", "run", "--", "true"],
        capture_output=True,
        timeout=120,
        cwd=tmp_path,
        preexec_fn=_limited(limit),
    )
    assert done.returncode == 111
    said = done.stderr.decode().splitlines()
    assert len(said) == 1 and f"ulimit -n: {limit}" in said[0], said


# A batch's and a benchmark's call open descriptors of their own before the service starts: at
# ``ulimit -n 8`` the caller's start of its service (its socket, ``Popen``'s pipe) met EMFILE and
# raised a bare ``OSError: [Errno 24] Too many open files``, naming neither the limit nor whose.
OWN_DESCRIPTORS = r"""
import json, processkit
from processkit.api.service import ServiceUnstartable

seen = []
for call in (lambda: processkit.batch([{"args": ["true"]}], out="out"), lambda: processkit.bench(["true"], runs=2)):
    try:
        call()
        seen.append("ran")
    except ServiceUnstartable as exc:
        seen.append([exc.code, str(exc)])
print(json.dumps(seen))
"""


def test_a_caller_out_of_descriptors_to_start_its_service_is_told_the_limit(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", OWN_DESCRIPTORS], capture_output=True, timeout=120, cwd=tmp_path, preexec_fn=_limited(8)
    )
    assert done.returncode == 0, done.stderr.decode()
    said = (
        "no descriptor left to start the runner service: the open-file limit (ulimit -n: 8) is reached; raise the limit"
    )
    assert json.loads(done.stdout) == [[111, said]] * 2
