"""The API's child takes ``os.environ`` at the call, never the C library's environment, which a
caller may have changed apart from it (``os.putenv``, ``os.unsetenv``, a C extension's ``setenv``):
a ``subprocess`` child, spawned with the C environment, sees those changes, the API's does not
(docs/api.md, "The child's environment"). Pinned so the words stay true: one call, two children."""

from __future__ import annotations

import json
import subprocess
import sys

CALLER = """
import json, os, subprocess, processkit
os.putenv("PK_PUT_ALONE", "put")        # the C environment only
os.environ["PK_UNSET_ALONE"] = "kept"   # both, then out of the C environment only
os.unsetenv("PK_UNSET_ALONE")
show = ["sh", "-c", 'printf "%s|%s" "${PK_PUT_ALONE-unset}" "${PK_UNSET_ALONE-unset}"']
print(json.dumps({
    "api": processkit.run(show, capture_output=True, text=True).stdout,
    "subprocess": subprocess.run(show, capture_output=True, text=True).stdout,
}))
"""


def test_the_api_child_takes_os_environ_where_subprocess_takes_the_c_environment(tmp_path, isolated_registry):
    done = subprocess.run([sys.executable, "-c", CALLER], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"api": "unset|kept", "subprocess": "put|unset"}, seen
