"""Streams a reader is pointed at (threat60): ``events --file``, ``events --validate --file`` and
``report STREAM`` (a file, or a directory's ``*.jsonl``) are often run by root over a stream in
``/tmp`` or another user's directory. Another user's symbolic link at that name (to a file of
root's they cannot read) made root print the file: each line that is no event is quoted in
``events``' and ``report``'s per-line diagnostics, and an object line is shown field by field.
The name is now walked as an input's is (``userfiles.open_judged``): another user's link at it is
refused (111, naming the link's owner), nothing of the file is shown; the user's own links, FIFOs
and ``/dev/stdin`` still work. With a second OS user, as tests/test_other_users.py makes it."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess

import pytest

from conftest import run_cli
from privileges import as_user
from test_events_fifo import fed_when_open
from test_other_users import as_other, other_user, refused, shared  # noqa: F401  (fixtures)

SECRET = "root:root-only-secret-hash:19000"
LIMIT = 60
READERS = {
    "events": ("events", "--file"),
    "events --validate": ("events", "--validate", "--file"),
    "report": ("report", "-o", "{page}"),
}


@pytest.fixture
def secret(tmp_path):
    """A file of root's, in a directory the attacker cannot enter: a line that is no JSON, and one
    that is an object but no event."""
    path = tmp_path / "private" / "shadow"
    path.parent.mkdir(mode=0o700)
    path.write_text(f'{SECRET}\n{{"secret": "{SECRET}"}}\n')
    return path


def read(reader: str, path, tmp_path):
    words = [word.format(page=tmp_path / "page.html") for word in READERS[reader]]
    return run_cli(*words, path, timeout=LIMIT)


def shown(result, tmp_path) -> str:
    page = tmp_path / "page.html"
    return (result.stdout + result.stderr).decode() + (page.read_text() if page.exists() else "")


@pytest.mark.parametrize("reader", READERS)
def test_another_users_link_at_a_stream_is_not_read(tmp_path, other_user, shared, secret, reader):  # noqa: F811
    planted = os.path.join(shared, "run.jsonl")
    as_other(other_user, 'ln -s "$2" "$1"', planted, secret)
    result = read(reader, planted, tmp_path)
    assert SECRET not in shown(result, tmp_path)
    refused(result, f"symbolic link of uid {other_user.pw_uid}")


def test_another_users_link_in_a_directory_of_streams_is_not_read(tmp_path, other_user, shared, secret):  # noqa: F811
    """A directory holding nothing but their link: refused, as there is no stream left to read."""
    theirs = os.path.join(shared, "streams")
    as_other(other_user, 'mkdir "$1"; ln -s "$2" "$1/run.jsonl"', theirs, secret)
    result = read("report", theirs, tmp_path)
    assert SECRET not in shown(result, tmp_path)
    refused(result, f"symbolic link of uid {other_user.pw_uid}")


def test_a_directory_of_streams_with_another_users_links_is_drawn_without_them(tmp_path, other_user, shared, secret):  # noqa: F811
    """Their directory of streams, with their own ``latest.jsonl -> run-42.jsonl`` and a link to
    root's file: the whole report failed (111) for one link; each link is now skipped with a
    warning naming the refusal, and the page is drawn from their stream."""
    theirs = os.path.join(shared, "streams")
    os.mkdir(theirs)
    ran = run_cli(
        "run", "--jsonl", os.path.join(theirs, "run-42.jsonl"), "--run-id", "run-42", "--", "true", timeout=LIMIT
    )
    assert ran.returncode == 0, ran.stderr
    for name in [".", "run-42.jsonl"]:
        os.chown(os.path.join(theirs, name), other_user.pw_uid, other_user.pw_gid)
    as_other(other_user, 'ln -s run-42.jsonl "$1/latest.jsonl"; ln -s "$2" "$1/shadow.jsonl"', theirs, secret)
    result = read("report", theirs, tmp_path)
    warned = result.stderr.decode()
    assert result.returncode == 0, warned
    assert SECRET not in shown(result, tmp_path)
    for name in ["latest.jsonl", "shadow.jsonl"]:
        assert f"skipping {theirs}/{name}: " in warned and f"symbolic link of uid {other_user.pw_uid}" in warned, warned
    assert "run-42" in (tmp_path / "page.html").read_text()


PAIRS = {
    "a bench export or not": ("export.json", ()),
    "a directory or a file": (".", ()),
    "a directory or a file, with --usage-file": (".", ("--usage-file", "{usage}")),
    "a batch's directory or a file": ("batch", ()),
}


@pytest.mark.parametrize("pair", PAIRS)
def test_another_users_link_is_refused_in_the_same_words_whatever_it_leads_to(
    tmp_path, other_user, shared, secret, pair
):  # noqa: F811
    """What their link leads to (a root-only file that looks like a bench export, a directory of
    root's, a batch's ``--out`` of root's) was looked at before the link was judged, and the
    refusal's words (or exit code: ``--usage-file`` with a directory is a usage error) told it."""
    (secret.parent / "export.json").write_text(json.dumps({"results": [{"command": "true", "times": [0.1, 0.2]}]}))
    (secret.parent / "batch").mkdir()
    (secret.parent / "batch" / "summary.jsonl").write_text("")
    name, extra = PAIRS[pair]
    said = []
    for number, target in enumerate([secret.parent / name, secret]):
        planted = os.path.join(shared, f"link{number}")
        as_other(other_user, 'ln -s "$2" "$1"', planted, target)
        words = [word.format(usage=tmp_path / "usage.json") for word in extra]
        result = run_cli("report", planted, "-o", tmp_path / "page.html", *words, timeout=LIMIT)
        refused(result, f"symbolic link of uid {other_user.pw_uid}")
        said.append(result.stderr.decode().replace(planted, "LINK"))
    assert said[0] == said[1]


def test_another_users_link_to_a_directory_in_their_own_directory_is_not_followed(tmp_path, other_user, shared, secret):  # noqa: F811
    """``report THEIRDIR/streams``, their link to a directory of root's in a directory of theirs
    that is not sticky: the name was walked as a directory is (a link there followed whoever
    owns it), and root's run was drawn; ``streams/.`` was walked so still. Refused as their link
    at a stream's name is."""
    made = run_cli(
        "run", "--jsonl", secret.parent / "roots.jsonl", "--run-id", "roots-own-run", "--", "true", timeout=LIMIT
    )
    assert made.returncode == 0, made.stderr
    theirs = os.path.join(shared, "theirs")
    as_other(other_user, 'mkdir -m 0755 "$1"; ln -s "$2" "$1/streams"', theirs, secret.parent)
    for given in ("streams", "streams/", "streams/.", "streams/./", "streams//."):
        result = read("report", os.path.join(theirs, given), tmp_path)
        assert "roots-own-run" not in shown(result, tmp_path)
        refused(result, f"symbolic link of uid {other_user.pw_uid}")


def test_an_empty_name_is_no_directory(tmp_path):
    """``report ""`` drew the working directory's streams; an empty name names no stream: a
    usage error (100), as every empty path is."""
    made = run_cli("run", "--jsonl", tmp_path / "here.jsonl", "--", "true", timeout=LIMIT)
    assert made.returncode == 0, made.stderr
    result = run_cli("report", "", "-o", tmp_path / "page.html", timeout=LIMIT, cwd=tmp_path)
    assert result.returncode == 100 and b"expected a path (an empty one names none)" in result.stderr, result.stderr
    assert not (tmp_path / "page.html").exists()


def test_another_users_link_to_a_directory_of_roots_lists_nothing(tmp_path, other_user, shared, secret):  # noqa: F811
    """``report DIR`` through their link to a directory of root's: refused before it is listed, so
    not even the names of root's streams are shown."""
    (secret.parent / "root-only-name.jsonl").write_text("")
    planted = os.path.join(shared, "streams")
    as_other(other_user, 'ln -s "$2" "$1"', planted, secret.parent)
    result = read("report", planted, tmp_path)
    assert b"root-only-name" not in result.stderr
    refused(result, f"symbolic link of uid {other_user.pw_uid}")


@pytest.mark.parametrize("reader", READERS)
def test_ones_own_link_to_a_stream_is_still_read(tmp_path, shared, secret, reader):  # noqa: F811
    own = os.path.join(shared, "own.jsonl")
    os.symlink(secret, own)
    try:
        result = read(reader, own, tmp_path)
    finally:
        os.unlink(own)
    assert result.returncode != 111 and b"symbolic link" not in result.stderr, result.stderr
    assert reader == "report" or SECRET in shown(result, tmp_path), "the user's own link is followed"


@pytest.fixture
def stream(tmp_path):
    """A stream of root's own, for ``report --usage-file``."""
    path = tmp_path / "run.jsonl"
    result = run_cli("run", "--jsonl", path, "--", "true", timeout=LIMIT)
    assert result.returncode == 0, result.stderr
    return path


@pytest.mark.parametrize("reader", ["report", "bench --baseline", "report --usage-file"])
def test_another_users_link_at_a_json_input_is_not_read(tmp_path, other_user, shared, stream, reader):  # noqa: F811
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "export.json").write_text(json.dumps({"results": [{"command": SECRET, "times": [0.1, 0.2]}]}))
    planted = os.path.join(shared, "export.json")
    as_other(other_user, 'ln -s "$2" "$1"', planted, private / "export.json")
    page = tmp_path / "page.html"
    words = {
        "report": ("report", planted, "-o", page),
        "bench --baseline": ("bench", "--baseline", planted, "-N", "--runs", "2", "true"),
        "report --usage-file": ("report", stream, "--usage-file", planted, "-o", page),
    }[reader]
    result = run_cli(*words, timeout=LIMIT)
    assert SECRET not in shown(result, tmp_path)
    refused(result, f"symbolic link of uid {other_user.pw_uid}")


@contextlib.contextmanager
def theirs_ready(other_user, script: str, path: str):  # noqa: F811
    """``sh -ec SCRIPT sh PATH`` as the attacker, from once it has said ``ready`` to the end of
    the block (it is killed then, if still running)."""
    process = subprocess.Popen(
        [*as_user(other_user), "sh", "-ec", script, "sh", path],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        yield
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def held_fifo(other_user, shared):  # noqa: F811
    """A FIFO of the attacker's in the shared directory, held open for writing by a process of
    theirs that never writes: a reader that waits for its end of file waits for ever."""
    path = os.path.join(shared, "held.fifo")
    with theirs_ready(other_user, 'mkfifo -m 0644 "$1"; exec 3<>"$1"; echo ready; exec sleep 600', path):
        yield path


@pytest.mark.parametrize(
    "words",
    [
        ("events", "--file", "{fifo}"),
        ("events", "--validate", "--file", "{fifo}"),
        ("report", "{fifo}", "-o", "{page}"),
        ("run", "--jsonl", "{jsonl}", "--env-file", "{fifo}", "--", "true"),
        ("batch", "--dry-run", "--", "echo", "::::", "{fifo}"),
        ("batch", "{fifo}", "--out", "{out}"),
    ],
    ids=["events", "events --validate", "report", "--env-file", "batch ::::", "batch manifest"],
)
def test_another_users_held_fifo_is_refused_not_waited_on(tmp_path, other_user, held_fifo, words):  # noqa: F811
    where = {
        "fifo": held_fifo,
        "page": tmp_path / "page.html",
        "jsonl": tmp_path / "run.jsonl",
        "out": tmp_path / "out",
    }
    result = run_cli(*(word.format(**where) for word in words), timeout=LIMIT)
    refused(result, f"FIFO of uid {other_user.pw_uid}")


def test_another_users_fifo_as_stdin_file_is_read(tmp_path, other_user, shared):  # noqa: F811
    """``--stdin-file`` is the one input that takes another user's FIFO (root feeding a child from
    an app user's FIFO): its open waits for no writer and ``--timeout`` ends one that never writes.
    Their writer's open waits for the run's, so the bytes come once the run reads."""
    fifo = os.path.join(shared, "feed.fifo")
    with theirs_ready(other_user, 'mkfifo -m 0644 "$1"; echo ready; printf "fed by them\\n" > "$1"', fifo):
        result = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--stdin-file", fifo, "--timeout", "60s", "--", "cat",
                         timeout=LIMIT)  # fmt: skip
    assert result.returncode == 0 and result.stdout == b"fed by them\n", result


def test_another_users_fifo_as_stdin_file_held_never_written_ends_by_timeout(tmp_path, held_fifo):
    result = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--stdin-file", held_fifo, "--timeout", "1s", "--", "cat",
                     timeout=LIMIT)  # fmt: skip
    assert result.returncode == 106, result.stderr


def test_ones_own_fifo_is_still_read(tmp_path, shared):  # noqa: F811
    """The stream is written once ``events`` has the FIFO open (this test holds it for writing
    from before, so the reader never finds it writerless); every wait is bounded."""
    fifo = os.path.join(shared, "own.fifo")
    os.mkfifo(fifo)
    stream = tmp_path / "run.jsonl"
    assert run_cli("run", "--jsonl", stream, "--", "true", timeout=LIMIT).returncode == 0
    code, out, err, _ = fed_when_open(fifo, ("events", "--validate", "--file", fifo),
                                      lambda held: os.write(held, stream.read_bytes()))  # fmt: skip
    assert code == 0 and b"all valid" in out, (out, err)


def _holes_found(directory: str) -> bool:
    """Whether the file system says where a file's data is (``SEEK_DATA`` past a hole): probed once."""
    probe = os.path.join(directory, "probe")
    with open(probe, "wb") as file:
        file.truncate(1 << 20)
        file.seek((1 << 20) - 1)
        file.write(b"x")
    fd = os.open(probe, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_DATA) > 0
    except OSError as exc:
        assert exc.errno in (errno.EINVAL, errno.EOPNOTSUPP)
        return False
    finally:
        os.close(fd)
        os.unlink(probe)


def test_a_sparse_stream_is_read_in_the_time_its_data_takes(tmp_path, other_user, shared):  # noqa: F811
    """Their 1 TiB file of one hole (``truncate``: no disk taken) and one line: ``events`` read
    every NUL of it, hours at a few hundred MB/s; a hole is now passed over, as the same line."""
    if not _holes_found(shared):
        pytest.skip("this file system does not say where a sparse file's holes are (SEEK_DATA)")
    sparse = os.path.join(shared, "sparse.jsonl")
    as_other(other_user, 'truncate -s 1T "$1"; printf "\\n{}\\n" >> "$1"', sparse)
    result = run_cli("events", "--validate", "--file", sparse, timeout=LIMIT)
    said = result.stdout.decode()
    assert result.returncode == 114 and "line 1: line exceeds the 1048576-byte limit" in said, result
    assert "checked 2 lines: 0 valid, 2 invalid" in said, said


def test_a_killed_rings_capture_hard_linked_to_roots_file_is_not_shown(tmp_path, other_user, shared, secret):  # noqa: F811
    """``report STREAM --capture-dir DIR`` of a ring run whose runner was killed reads the ring
    back by its marks (``events.kept.Salvage``): their directory's live record and marks claim
    the bytes of ``stdout.log``, a hard link to a file of root's (which they can make where
    ``fs.protected_hardlinks`` is off; made here by root). It is refused as every reader in a
    directory given refuses one (``userfiles.open_named``), and nothing of it is on the page."""
    from processkit import capture_layout

    theirs = os.path.join(shared, "theirs")
    os.mkdir(theirs)
    size = secret.stat().st_size
    marks = capture_layout.start(theirs, "run-x", "tail", 4096, 0)
    assert marks is not None
    marks.slots["stdout"][capture_layout.STORED] = marks.slots["stdout"][capture_layout.PENDING] = size
    os.link(secret, os.path.join(theirs, "stdout.log"))
    for name in [".", capture_layout.NAME, capture_layout.MARKS_NAME]:
        os.chown(os.path.join(theirs, name), other_user.pw_uid, other_user.pw_gid)
    stream = tmp_path / "run.jsonl"
    assert run_cli("run", "--jsonl", stream, "--run-id", "run-x", "--", "true", timeout=LIMIT).returncode == 0
    started = stream.read_text().splitlines()[0]  # the stream of a runner killed after its start
    stream.write_text(started + "\n")
    page = tmp_path / "page.html"
    result = run_cli("report", stream, "--capture-dir", theirs, "-o", page, timeout=LIMIT)
    assert result.returncode == 0, result.stderr
    assert "root-only-secret" not in page.read_text()


def test_another_users_link_beside_a_bench_export_is_refused_as_a_file(tmp_path, other_user, shared, secret):  # noqa: F811
    """``report OLD.json THEIRLINK.json``: their link was taken for "not an export" and the
    report failed as a usage error (100) saying nothing of it; it is refused (111, naming its
    owner), as a file, not as an event stream."""
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"results": [{"command": "true", "times": [0.1, 0.2]}]}))
    planted = os.path.join(shared, "new.json")
    as_other(other_user, 'ln -s "$2" "$1"', planted, old)
    result = run_cli("report", old, planted, "-o", tmp_path / "page.html", timeout=LIMIT)
    refused(result, f"cannot read {planted}: ", f"symbolic link of uid {other_user.pw_uid}")
    assert b"events stream" not in result.stderr
