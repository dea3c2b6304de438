"""The caller's environment and umask travel to its runner service in one shape
(``api.caller_env.CallerEnv``), for a run, a batch and a benchmark alike, checked in one place
(``service.inbound``). A run request carries only what changed since the last one sent: a
umask changed alone sends no environment, an environment changed alone no umask, and the
service keeps the rest as last sent."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from processkit.api.caller_env import CallerEnv
from processkit.service import inbound

SCRIPT = r"""
import json, os
import processkit
from processkit.api import wire

sent = []
original = wire.framed


def recording(message, *mark):  # each request's frame is made just before it is written
    if message[0] == "run":
        caller = message[3].get("caller")
        sent.append(None if caller is None else [caller.env is not None, caller.umask, caller.limits])
    return original(message, *mark)


wire.framed = recording
seen = []


def call():
    done = processkit.run(["sh", "-c", 'echo "$K $(umask)"'], capture_output=True)
    seen.append(done.stdout.decode().strip())


os.umask(0o022)
os.environ["K"] = "a"
call()
call()  # nothing changed: nothing carried
os.umask(0o027)
call()  # the umask alone
os.environ["K"] = "b"
call()  # the environment alone: the umask kept as last sent
print(json.dumps({"sent": sent, "seen": seen}))
"""


def test_a_run_request_carries_only_what_changed_of_the_environment_and_the_umask():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["seen"] == ["a 0022", "a 0022", "a 0027", "b 0027"]
    # no limits: the service inherited them at its start, and none changed since (and a pickled
    # CallerEnv without them is one a service of an older install reads: api_overhead --against)
    assert found["sent"] == [[True, 0o022, None], None, [False, 0o027, None], [True, None, None]]
    assert CallerEnv({}, 0o022).__reduce__()[1] == ({}, 0o022)


def test_one_check_refuses_a_callers_environment_and_umask_not_of_the_shape_in_each_request():
    whole = CallerEnv({"K": "v"}, 0o022, ((4, 0, -1),))
    good = {
        "run": ("run", 1, {}, {"caller": CallerEnv(umask=0o077)}),
        "batch": ("batch", 1, [], None, "/", whole),
        "bench": ("bench", 1, SimpleNamespace(caller=whole), 0),
    }
    assert {kind: inbound.problem(frame, set()) for kind, frame in good.items()} == dict.fromkeys(good)
    bad = [
        ("run", 1, {}, {"caller": ({"K": "v"}, 0o022)}),  # the old tuple
        ("run", 1, {}, {"caller": CallerEnv(umask=0o1000)}),
        ("run", 1, {}, {"caller": CallerEnv(env={"K": 1})}),
        ("batch", 1, [], None, "/", ({"K": "v"}, 0o022)),  # a batch's was never checked
        ("batch", 1, [], None, "/", CallerEnv(umask=0o022)),  # its process takes it whole
        ("bench", 1, SimpleNamespace(caller=CallerEnv(env={})), 0),
        ("bench", 1, SimpleNamespace(), 0),
        ("batch", 1, [], None, "/", CallerEnv({"K": "v"}, 0o022)),  # its children take the limits
        ("run", 1, {}, {"caller": CallerEnv(limits=((4, 0),))}),  # a limit is (kind, soft, hard)
        ("run", 1, {}, {"caller": CallerEnv(limits=((4, 0, 1 << 64),))}),
        ("run", 1, {}, {"caller": CallerEnv(limits=[(4, 0, 0)])}),
    ]
    for frame in bad:
        assert "caller's" in (inbound.problem(frame, set()) or ""), frame


def test_a_run_request_carries_the_callers_limits_only_when_they_changed():
    import resource

    from processkit import rlimits
    from processkit.api import caller_env

    sent, last = caller_env.changed((None, None, None))  # nothing sent before
    assert sent is not None and sent.limits == rlimits.as_sent(rlimits.now())
    assert resource.RLIMIT_RSS not in dict((kind, soft) for kind, soft, _ in sent.limits)  # Linux ignores it
    assert caller_env.changed(last)[0] is None  # nothing changed: nothing sent
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == 0:
        pytest.skip("no core file size this process may change (a hard limit of 0)")
    resource.setrlimit(resource.RLIMIT_CORE, (0 if soft else hard, hard))  # changed (a hard of 0 aside)
    try:
        sent, _ = caller_env.changed(last)
        assert sent is not None and (sent.env, sent.umask) == (None, None)
        assert sent.limits == rlimits.as_sent(rlimits.now())
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
