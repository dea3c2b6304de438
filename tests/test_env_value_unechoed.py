"""An environment value of the wrong type is refused by its key and type, never shown: a numeric
secret (a PIN, a token) written as a JSON number in a manifest's ``env``, or as an int in the
API's ``env=``, was quoted in the error line (``... not int (48151623)``), which lands in CI logs;
``args`` items never were (docs/threat-model.md, "Untrusted input")."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SAFETY_NET, run_cli

SECRET = 48151623


@pytest.mark.parametrize("value", [SECRET, [f"{SECRET}"], {"token": f"{SECRET}"}])
def test_a_manifest_env_value_of_the_wrong_type_is_not_echoed(value, tmp_path):
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"args": ["true"], "env": {"PIN": value}}) + "\n")
    done = run_cli("batch", str(manifest), "--out", str(tmp_path / "out"), text=True)
    assert done.returncode == 100, done.stderr
    assert "the value of 'PIN' in env must be a string" in done.stderr
    assert str(SECRET) not in done.stderr + done.stdout


@pytest.mark.parametrize("keyword", ["env", "env_add"])
def test_an_api_env_value_of_the_wrong_type_is_not_echoed(keyword, tmp_path):
    script = (
        "import processkit\n"
        "try:\n"
        f"    processkit.run(['true'], {keyword}={{'PIN': {SECRET}}})\n"
        "except TypeError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=SAFETY_NET
    )
    assert done.returncode == 0, done.stderr
    assert "the value of 'PIN' in" in done.stdout and "must be a string, not int" in done.stdout
    assert str(SECRET) not in done.stdout + done.stderr
