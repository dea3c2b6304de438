"""The native spawn's envp from one spawn to the next (``engine/spawn_native._environment``): a
bench session's runs differ from the first in one variable (its iteration), so each child's
envp is the first one's pointers with that entry's own string put in, not every string joined
and pointed at again; and every child still gets exactly its own environment, in its order."""

from __future__ import annotations

import os

from processkit.containment.base import ChildJoins
from processkit.engine import spawn_native

BASE = {"PATH": "/usr/bin:/bin", "LANG": "C", "HOME": "/nonexistent", "A": "1"}


def _environ_of(env: dict[str, str], tmp_path) -> list[bytes]:
    """The environment a native child of ``env`` was given, as ``env -0`` prints it."""
    out = tmp_path / "environ"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        result = spawn_native.Pending(
            ["env", "-0"], env, None, ChildJoins(), [-1, fd, -1], False, 0, False, passed=()
        ).wait()
    finally:
        os.close(fd)
    assert result.pid > 0, (result.stage, result.error)
    if result.pidfd >= 0:
        os.close(result.pidfd)
    assert os.waitstatus_to_exitcode(os.waitpid(result.pid, 0)[1]) == 0
    return out.read_bytes().split(b"\0")[:-1]


def test_a_spawn_whose_environment_differs_in_one_value_joins_no_strings_again(tmp_path, monkeypatch):
    """Four spawns of one environment, its iteration changed each time: one envp made whole."""
    made: list[int] = []
    real = spawn_native._Strings

    class Counted(real):  # type: ignore[misc, valid-type]
        def __init__(self, ffi, items):
            made.append(len(items))
            super().__init__(ffi, items)

    monkeypatch.setattr(spawn_native, "_Strings", Counted)
    monkeypatch.setattr(spawn_native, "_ENVIRONMENT", [None])
    seen = []
    for iteration in range(4):
        env = {**BASE, "HYPERFINE_ITERATION": str(iteration), "Z": "last"}
        seen.append(_environ_of(env, tmp_path))
        assert seen[-1] == [f"{key}={value}".encode() for key, value in env.items()]
    assert made.count(len(BASE) + 2) == 1, made  # the first spawn's envp only: the rest patch it
    # other keys, another order, or more than a few values changed: made whole again, and right
    reordered = {"B": "2", **BASE}
    changed = {key: value + "x" for key, value in reordered.items()}
    for env in (reordered, changed, {"PATH": "/usr/bin:/bin"}):
        assert _environ_of(env, tmp_path) == [f"{key}={value}".encode() for key, value in env.items()]
