"""``bench``'s pool of lent cgroups keeps an idle memory group's files open between its runs (as
a batch's and the API service's do, within the open-file limit's room): a group started again
for a later sample is a few ``pread``s, not a dozen ``open``s and ``close``s a sample. The CLI's
own ``main`` runs in a process whose ``os.open`` logs every open of a memory group's settings
file; each group's is opened once, when it is made, however often it is lent again."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap

import pytest

LOGGED = textwrap.dedent(
    """
    import os, sys

    log, real = sys.argv[1], os.open

    def logged(path, *args, **kwargs):
        if str(path).endswith("/memory.limit_in_bytes"):
            with open(log, "a") as handle:
                handle.write(str(path) + "\\n")
        return real(path, *args, **kwargs)

    os.open = logged
    sys.argv = ["processkit-cli", *sys.argv[2:]]
    from processkit.cli.main import entry

    entry()
    """
)


def test_an_idle_memory_groups_settings_are_opened_once_however_often_it_is_lent(tmp_path):
    log = tmp_path / "opens.txt"
    # ~0.6 s of samples: a group given back drains its charge within ~0.2 s and is lent again
    done = subprocess.run(
        [sys.executable, "-c", LOGGED, str(log), "bench", "-N", "--style", "none", "--runs", "40", "sleep 0.015"],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    opened = log.read_text().splitlines() if log.exists() else []
    if not opened:
        pytest.skip("no cgroup v1 memory group is lent here")
    per_group = collections.Counter(path.rsplit("/", 2)[-2] for path in opened)
    assert len(per_group) < 40, "no group was lent twice: nothing shows"
    assert set(per_group.values()) == {1}, per_group
