"""Issue 46, break 3 and the ``--history`` weak point: root reads another user's batch directory
(``report DIR``, ``report DIR/job/events.jsonl``) or summary (``batch --history``), and the
attacker has put links, recorded paths and hard links there pointing at a file of root's they
cannot read.

A stream's capture is read only inside the directory given (the batch's ``--out``, a
``--capture-dir``, else the directory holding the stream), through ``userfiles.open_named``: no
link another user made is followed, a recorded path never chooses the file, and a hard link to a
file of root's in a directory others can change is refused. The page shows why, never the file.
The user's own links keep working.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import run_cli
from test_other_users import as_other, other_user, refused, shared  # noqa: F401  (fixtures)

SECRET = "root-only secret line"
OOPS = "oops from the job"
LIMIT = 60


@pytest.fixture
def secret(tmp_path):
    """A capture-named file of root's, in a directory the attacker cannot enter."""
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    path = folder / "stderr.log"
    path.write_text(SECRET + "\n")
    return path


def make_batch(out, cwd=None) -> None:
    """A batch of one failed job in ``out`` (relative to ``cwd`` when given)."""
    where = out if cwd is None else cwd / out
    manifest = where.parent / f"{where.name}.manifest.jsonl"
    manifest.write_text(json.dumps({"id": "bad", "args": ["sh", "-c", f"echo {OOPS} >&2; exit 3"]}) + "\n")
    result = run_cli("batch", manifest, "--out", out, cwd=cwd, timeout=LIMIT)
    out = where
    assert result.returncode == 117 and (out / "bad" / "capture" / "stderr.log").exists(), result.stderr


@pytest.fixture
def theirs(tmp_path, other_user, shared):
    """A failed job's batch directory belonging to the attacker (made here, then given to them)."""
    from pathlib import Path

    out = Path(shared) / "theirs"
    make_batch(out)
    for path in [out, *out.rglob("*")]:
        os.chown(path, other_user.pw_uid, other_user.pw_gid, follow_symlinks=False)
    return out


def report(target, tmp_path, cwd=None) -> str:
    page = tmp_path / "page.html"
    result = run_cli("report", target, "-o", page, cwd=cwd, timeout=LIMIT)
    assert result.returncode == 0, result.stderr
    return page.read_text()


def rewrite(path, change) -> None:
    """Change each JSON line of the attacker's file ``path`` (its owner and mode kept)."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(change(line)) + "\n" for line in lines))


# -- report DIR: the batch's page --------------------------------------------------------------
def test_a_capture_planted_as_a_link_is_not_read_onto_the_page(tmp_path, other_user, theirs, secret):
    assert OOPS in report(theirs, tmp_path), "their own capture is shown"
    as_other(other_user, 'rm "$1"; ln -s "$2" "$1"', theirs / "bad" / "capture" / "stderr.log", secret)
    page = report(theirs, tmp_path)
    assert SECRET not in page and f"symbolic link of uid {other_user.pw_uid}" in page


def test_a_capture_directory_planted_as_a_link_is_not_followed(tmp_path, other_user, theirs, secret):
    as_other(other_user, 'rm -r "$1"; ln -s "$2" "$1"', theirs / "bad" / "capture", secret.parent)
    page = report(theirs, tmp_path)
    assert SECRET not in page and f"symbolic link of uid {other_user.pw_uid}" in page


def test_a_summarys_recorded_capture_path_never_chooses_the_file(tmp_path, other_user, theirs, secret):
    """An absolute path in the summary named any file called stderr.log; a relative one was
    read from the reporter's working directory."""

    def point(line, at):
        line["capture"]["stderr"]["path"] = at
        return line

    as_other(other_user, 'rm "$1"', theirs / "bad" / "capture" / "stderr.log")
    for recorded, cwd in ((str(secret), None), ("private/stderr.log", tmp_path)):
        rewrite(theirs / "summary.jsonl", lambda line, at=recorded: point(line, at))
        page = report(theirs, tmp_path, cwd=cwd)
        assert SECRET not in page and "does not exist" in page, recorded


def test_a_hard_link_to_a_file_of_roots_is_refused(tmp_path, other_user, theirs, secret):
    """Where ``fs.protected_hardlinks`` is off the attacker can link a file of root's into their
    directory; here root makes the link, as they could there."""
    planted = theirs / "bad" / "capture" / "stderr.log"
    planted.unlink()
    try:
        os.link(secret, planted)
    except OSError as exc:
        pytest.skip(f"cannot hard-link across these directories: {exc.strerror}")
    page = report(theirs, tmp_path)
    assert SECRET not in page and "has other hard links, in a directory other users can change" in page


# -- report STREAM: a job's own events.jsonl ---------------------------------------------------
@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_a_streams_recorded_capture_path_is_read_only_inside_its_directory(
    tmp_path, other_user, theirs, secret, relative
):
    def point(event):
        if event.get("event") == "output_captured":
            event["stderr"]["path"] = "private/stderr.log" if relative else str(secret)
        return event

    stream = theirs / "bad" / "events.jsonl"
    rewrite(stream, point)
    page = report(stream, tmp_path, cwd=tmp_path if relative else None)
    assert SECRET not in page and "does not exist" in page


def test_a_streams_capture_linked_by_another_user_is_not_read(tmp_path, other_user, theirs, secret):
    as_other(other_user, 'rm "$1"; ln -s "$2" "$1"', theirs / "bad" / "capture" / "stderr.log", secret)
    page = report(theirs / "bad" / "events.jsonl", tmp_path)
    assert SECRET not in page and f"symbolic link of uid {other_user.pw_uid}" in page


def test_own_streams_find_their_captures_beside_them_and_through_own_links(tmp_path):
    """No second user needed: the user's own batch, made with a relative ``--out`` and reported
    from elsewhere (its recorded path was read from the reporter's directory), and a capture
    directory the user moved and linked to."""
    from pathlib import Path

    make_batch(Path("mine"), cwd=tmp_path)
    out = tmp_path / "mine"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert OOPS in report(out / "bad" / "events.jsonl", tmp_path, cwd=elsewhere)
    shutil.move(out / "bad" / "capture", tmp_path / "moved")
    os.symlink(tmp_path / "moved", out / "bad" / "capture")
    assert OOPS in report(out, tmp_path, cwd=elsewhere)


def test_another_users_link_to_roots_batch_given_with_a_dot_is_not_followed(tmp_path, other_user, shared):  # noqa: F811
    """``report THEIRDIR/out/.``, their link to a batch directory of root's in a directory of
    theirs that is not sticky: ``out/.`` was walked as a directory (the link followed) and root's
    batch drawn. Refused as their link at ``out`` is."""
    mine = tmp_path / "private"
    mine.mkdir(mode=0o700)
    make_batch(mine / "out")
    there = os.path.join(shared, "there")
    as_other(other_user, 'mkdir -m 0755 "$1"; ln -s "$2" "$1/out"', there, mine / "out")
    for given in ("out", "out/.", "out/./"):
        page = tmp_path / "page.html"
        result = run_cli("report", os.path.join(there, given), "-o", page, timeout=LIMIT)
        assert not page.exists() or OOPS not in page.read_text(), given
        refused(result, f"symbolic link of uid {other_user.pw_uid}")


# -- batch --history ---------------------------------------------------------------------------
def test_history_through_another_users_link_is_refused(tmp_path, other_user, shared, secret):
    history = os.path.join(shared, "history.jsonl")
    as_other(other_user, 'ln -s "$2" "$1"', history, secret)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": ["true"]}) + "\n")
    result = run_cli("batch", manifest, "--out", tmp_path / "out", "--history", history, timeout=LIMIT)
    refused(result, "cannot read", f"symbolic link of uid {other_user.pw_uid}")
    assert not (tmp_path / "out").exists()
    mine = tmp_path / "mine.jsonl"
    os.symlink(secret, mine)  # the user's own link is theirs to follow
    result = run_cli("batch", manifest, "--out", tmp_path / "out", "--history", mine, timeout=LIMIT)
    assert result.returncode == 0, result.stderr
