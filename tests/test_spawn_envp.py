"""The native spawn's envp from one spawn to the next (``engine/spawn_native._environment``): a
bench session's runs differ from the first in one variable (its iteration), so each child's
envp is the first one's pointers with that entry's own string put in, not every string joined
and pointed at again; and every child still gets exactly its own environment, in its order."""

from __future__ import annotations

import enum
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_each_entry_reaches_the_child_as_os_fsencode_gives_it(tmp_path, monkeypatch):
    """The envp is encoded in one call, not one a string (``spawn_native._encoded``): undecodable
    bytes (U+DC80-U+DCFF), other letters and ``=`` in a value reach the child byte for byte."""
    monkeypatch.setattr(spawn_native, "_ENVIRONMENT", [None])
    env = {**BASE, "UNDECODED": "a\udcff\udc80b", "LETTERS": "é✓", "EQUALS": "x=y="}
    expected = [os.fsencode(key) + b"=" + os.fsencode(value) for key, value in env.items()]
    assert _environ_of(env, tmp_path) == expected


def test_an_empty_environment_reaches_the_child_empty(tmp_path, monkeypatch):
    """No variable is no string at all (``env={}``, ``--env-clear``): not one empty string, which
    a child reads as an entry of its own (``env`` prints an empty line)."""
    monkeypatch.setattr(spawn_native, "_ENVIRONMENT", [None])
    assert _environ_of({}, tmp_path) == []
    assert (tmp_path / "environ").read_bytes() == b""


def test_a_value_of_a_str_subclass_reaches_the_child_as_its_string(tmp_path, monkeypatch):
    """An enum's member that is a ``str`` (an ``env=`` value the API passes on) is its string, as
    ``os.fsencode`` and ``subprocess`` give it, never its name (``E.A``)."""

    class Kind(str, enum.Enum):
        A = "x"

    monkeypatch.setattr(spawn_native, "_ENVIRONMENT", [None])
    assert _environ_of({**BASE, "K": Kind.A}, tmp_path)[-1] == b"K=x"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from(["a", "/", "é", "\udcfe", "."]), max_size=5), min_size=1, max_size=6))
def test_the_exec_paths_are_os_path_join_of_each_encoded_directory(directories):
    """The PATH encoded in one call and each candidate joined without ``os.path.join``: the same
    bytes as the join of each directory's ``os.fsencode`` (an empty entry, a trailing slash)."""
    joined = [os.path.join(os.fsencode(directory), b"prog") for directory in directories]
    expected = [*dict.fromkeys(joined[:-1]), joined[-1]]
    assert spawn_native._exec_paths(b"prog", {"PATH": os.pathsep.join(directories)}) == expected


def test_a_path_entry_without_bytes_is_the_one_its_error_names():
    """A lone surrogate (no bytes, unlike U+DC80-U+DCFF) in one entry of the PATH: the error
    names that entry, as it did when each was encoded alone (``spawn_words.no_bytes``)."""
    with pytest.raises(UnicodeEncodeError) as raised:
        spawn_native._exec_paths(b"prog", {"PATH": "/usr/bin:/x\ud800"})
    assert raised.value.object == "/x\ud800"
