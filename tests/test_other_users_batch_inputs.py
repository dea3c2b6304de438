"""A batch's inputs named by its user: ``::::`` argument files, the manifest and a job's
``inputs`` are read as the runner's user (often root) and become jobs' argv and ids, or digests
in the summary, which others may read. Another user's symbolic link at such a name in ``/tmp``
made root read a file of root's (the batch printed its lines as a job's argv), as
``fs.protected_symlinks`` (off on such a host) exists to stop. The name is now walked as
``run --stdin-file``'s is (``safepath``): another user's link is refused (111, the refusal's
words), the user's own links and ``/dev/fd/N`` still work. With a second OS user, as
tests/test_other_users.py makes it."""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import run_cli
from test_other_users import as_other, other_user, refused, shared  # noqa: F401  (fixtures)
from test_other_users_inputs import secret  # noqa: F401  (a fixture)

SECRET = b'{"id": "leak", "args": ["echo", "root-only-secret"]}\n'


@pytest.fixture
def job_secret(secret):  # noqa: F811
    """That file of root's holding a job: a manifest's line, an argument's too."""
    secret.write_bytes(SECRET)
    return secret


@pytest.fixture
def planted(other_user, shared, job_secret):  # noqa: F811
    """Another user's link in a sticky, world-writable directory, to root's secret."""
    path = os.path.join(shared, "args")
    as_other(other_user, 'ln -s "$2" "$1"', path, job_secret)
    return path


def test_another_users_link_as_an_argument_file_is_not_followed(planted):
    result = run_cli("batch", "--dry-run", "--", "echo", "::::", planted)
    refused(result, "cannot read the argument file", "symbolic link of uid")
    assert b"root-only-secret" not in result.stdout + result.stderr


def test_another_users_link_as_the_manifest_is_not_followed(tmp_path, planted):
    result = run_cli("batch", planted, "--out", tmp_path / "out")
    refused(result, "cannot read the manifest", "symbolic link of uid")
    assert b"root-only-secret" not in result.stdout + result.stderr
    assert not (tmp_path / "out" / "summary.jsonl").exists()


def test_another_users_link_as_a_jobs_input_is_not_digested(tmp_path, planted):
    import hashlib

    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": [sys.executable, "-c", ""], "inputs": [planted]}) + "\n")
    result = run_cli("batch", manifest, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    (line,) = [json.loads(text) for text in (tmp_path / "out" / "summary.jsonl").read_text().splitlines()]
    recorded = line["inputs_sha256"][planted]
    assert recorded != hashlib.sha256(SECRET).hexdigest()
    assert recorded.startswith("unreadable:") and "symbolic link of uid" in recorded, recorded


def test_ones_own_link_and_descriptors_still_feed_a_batch(tmp_path, shared, job_secret):  # noqa: F811
    mine = os.path.join(shared, "mine")
    os.symlink(job_secret, mine)
    own = run_cli("batch", "--dry-run", "--", "echo", "::::", mine)
    assert own.returncode == 0, own.stderr
    assert b"root-only-secret" in own.stdout
    manifest = run_cli("batch", mine, "--out", tmp_path / "out")
    assert manifest.returncode == 0, manifest.stderr
    assert b"root-only-secret" in (tmp_path / "out" / "leak" / "capture" / "stdout.log").read_bytes()
    with open(job_secret, "rb") as handle:
        given = run_cli(
            "batch", "--dry-run", "--", "echo", "::::", f"/dev/fd/{handle.fileno()}", pass_fds=(handle.fileno(),)
        )
    assert given.returncode == 0, given.stderr
    assert b"root-only-secret" in given.stdout
