"""A /tmp of the test's own for the ``processkit-cli`` processes it starts.

A run's directory is ``/tmp/pkc-<token>`` (the reference fixes that base; no variable moves it,
unlike the registry's ``PROCESSKIT_CLI_REGISTRY_DIR``), and every same-user runner and ``prune``
on the host reaps the dead ones it finds there and in ``/dev/shm``. A test that kills a runner
and then checks what ``prune`` does with its directory is therefore at the mercy of any other
pytest or batch of the same user sweeping at that moment: it takes the victim first, and the
test's prune finds nothing. So each CLI process of such a test starts in a mount namespace of its
own, with the same directory bound on ``/tmp`` in all of them and a fresh tmpfs on ``/dev/shm``:
their run directories are this test's alone (and its prune reaps nobody else's). The entries of
``/tmp`` that hold pytest's temporary directories, the checkout and the interpreter (a clone or a
venv made under ``/tmp``) are bound back inside, so every path the test hands the CLI, and the
CLI's own code, mean what they mean here. Needs root (``mount``); elsewhere the CLI shares the
host's ``/tmp`` as before.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import conftest
import processkit

# $1: the own /tmp; then pairs of a /tmp entry and where it is bound back inside the own /tmp,
# up to "--"; then the command, with the same pid (exec).
_ENTER = (
    "set -e; mount -t tmpfs -o mode=1777 processkit-test-shm /dev/shm; own=$1; shift; "
    'while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done; shift; '
    'mount --rbind "$own" /tmp; unset XDG_RUNTIME_DIR; exec "$@"'
)


def _entries_needed(*paths: Path) -> list[str]:
    """The top-level /tmp entries under which any of ``paths`` lies (pytest's directories, the
    checkout, the interpreter), each once."""
    found: list[str] = []
    for path in paths:
        parts = path.resolve().parts
        if parts[:2] == ("/", "tmp") and len(parts) > 2 and parts[2] not in found:
            found.append(parts[2])
    return found


class OwnTmp:
    """The CLI's /tmp as the test sees it (``real``), and the command prefix that gives it one."""

    def __init__(self, real: Path, prefix: list[str]) -> None:
        self.real = real
        self.prefix = prefix

    def outside(self, path: str) -> str:
        """Where a path the CLI's processes name under /tmp is, seen from the test."""
        assert path.startswith("/tmp/"), path
        return str(self.real / path[len("/tmp/") :])

    def run_dirs(self, pattern: str) -> list[str]:
        """The CLI's /tmp entries matching ``pattern``, as the CLI names them."""
        return sorted("/tmp/" + os.path.basename(found) for found in glob.glob(str(self.real / pattern)))


def _shared() -> OwnTmp:
    return OwnTmp(Path("/tmp"), [])


PRIVATE_MOUNTS = ["unshare", "--mount", "--propagation", "private", "--"]  # exec: the command keeps the pid


@pytest.fixture
def own_tmp(tmp_path_factory, monkeypatch) -> OwnTmp:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return _shared()
    own = tmp_path_factory.mktemp("own-tmp")
    os.chmod(own, 0o1777)
    binds: list[str] = []
    here = Path(__file__).parent
    code = Path(processkit.__file__).parent
    for entry in _entries_needed(Path(tmp_path_factory.getbasetemp()), here.parent, code, Path(sys.prefix)):
        os.mkdir(os.path.join(own, entry))
        binds += [os.path.join("/tmp", entry), os.path.join(own, entry)]
    prefix = [*PRIVATE_MOUNTS, "sh", "-c", _ENTER, "sh", str(own), *binds, "--"]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        return _shared()
    plain = conftest.cli_command
    monkeypatch.setattr(conftest, "cli_command", lambda: [*prefix, *plain()])
    return OwnTmp(own, prefix)


def in_own_mounts(script: str, env: dict, **kwargs) -> subprocess.CompletedProcess:
    """``sh -ec script`` from ``/`` in a mount namespace of its own: what it mounts (a full
    tmpfs over ``/dev/shm`` or ``/tmp``) no one outside sees, and it goes with the script."""
    return subprocess.run(
        [*PRIVATE_MOUNTS, "sh", "-ec", script], capture_output=True, timeout=120, env=env, cwd="/", **kwargs
    )
