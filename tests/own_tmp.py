"""A /tmp of the test's own for the ``processkit-cli`` processes it starts.

A run's directory is ``/tmp/pkc-<token>`` (the reference fixes that base; no variable moves it,
unlike the registry's ``PROCESSKIT_CLI_REGISTRY_DIR``), and every same-user runner and ``prune``
on the host reaps the dead ones it finds there and in ``/dev/shm``. A test that kills a runner
and then checks what ``prune`` does with its directory is therefore at the mercy of any other
pytest or batch of the same user sweeping at that moment: it takes the victim first, and the
test's prune finds nothing. So each CLI process of such a test starts in a mount namespace of its
own, with the same directory bound on ``/tmp`` in all of them and a fresh tmpfs on ``/dev/shm``:
their run directories are this test's alone (and its prune reaps nobody else's). The entry of
``/tmp`` that holds pytest's temporary directories is bound back inside, so every path the test
hands the CLI means what it means here. Needs root (``mount``); elsewhere the CLI shares the
host's ``/tmp`` as before.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import conftest

# $1: the /tmp entry holding pytest's directories ("" when they are elsewhere), $2: where it is
# bound back inside the own /tmp, $3: the own /tmp; then the command, with the same pid (exec).
_ENTER = (
    "set -e; mount -t tmpfs -o mode=1777 processkit-test-shm /dev/shm; "
    'if [ -n "$1" ]; then mount --bind "$1" "$2"; fi; mount --rbind "$3" /tmp; shift 3; '
    'unset XDG_RUNTIME_DIR; exec "$@"'
)


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


@pytest.fixture
def own_tmp(tmp_path_factory, monkeypatch) -> OwnTmp:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return _shared()
    own = tmp_path_factory.mktemp("own-tmp")
    os.chmod(own, 0o1777)
    basetemp = Path(tmp_path_factory.getbasetemp()).resolve()
    top, inside = "", ""
    if basetemp.parts[:2] == ("/", "tmp") and len(basetemp.parts) > 2:
        top = os.path.join("/tmp", basetemp.parts[2])
        inside = os.path.join(own, basetemp.parts[2])
        os.mkdir(inside)
    prefix = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _ENTER, "sh", top, inside, str(own)]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        return _shared()
    plain = conftest.cli_command
    monkeypatch.setattr(conftest, "cli_command", lambda: [*prefix, *plain()])
    return OwnTmp(own, prefix)
