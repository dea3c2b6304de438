"""``report DIR`` over a directory another user controls (report61; docs/threat-model.md, "What
another user leaves for a reader"), with a second OS user as tests/test_other_users.py makes it.

- The directory was judged, then each entry walked again by its name: the other user, owning
  DIR's parent, swapped DIR for their link to a directory of root's between the two, and root's
  stream (or batch summary) was drawn. The swap is made here at that very moment, by a hook in
  the reporter's own process (the reads' first call waits for the other user's ``mv``), not by a
  race: every entry is now read relative to the judged directory's handle.
- ``report THEIRLINK/..`` climbed from wherever their link led (a directory of root's) and was
  drawn: a link a later ``..`` climbs above is judged as the name's own link is, as run's inputs'
  (``--stdin-file THEIRLINK/../FILE``) are, refused (111) naming its owner."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli
from test_other_users import as_other, other_user, refused, shared  # noqa: F401  (fixtures)

LIMIT = 60
SECRET_RUN = "root-only-secret-run"
THEIR_RUN = "their-own-run"

# The reporter, with ``module.function`` wrapped: its first call has the other user run
# ``script`` (as tests/test_other_users.as_other does) and only then goes on.
HOOKED = """
import functools, importlib, pwd, sys
from test_other_users import as_other
from processkit.cli.main import main

where, name, user, script, *rest = sys.argv[1:]
split = rest.index("--")
args, argv = rest[:split], rest[split + 1:]
module = importlib.import_module(where)
original = getattr(module, name)
done = []

@functools.wraps(original)
def swapped_first(*a, **k):
    if not done:
        done.append(name)
        as_other(pwd.getpwnam(user), script, *args)
    return original(*a, **k)

setattr(module, name, swapped_first)
sys.exit(main(argv))
"""


def report_swapped(tmp_path, user, hook: str, script: str, args: list, *argv) -> subprocess.CompletedProcess:
    """``processkit-cli report ARGV -o page.html`` with ``hook`` (``module:function``) wrapped."""
    where, name = hook.split(":")
    tests = os.path.dirname(os.path.abspath(__file__))
    return subprocess.run(
        [sys.executable, "-c", HOOKED, where, name, user.pw_name, script, *map(str, args), "--", "report"]
        + [str(word) for word in argv]
        + ["-o", str(tmp_path / "page.html")],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=LIMIT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))},
    )


def stream(tmp_path, run_id: str) -> str:
    """A run's event stream, made by root in its own directory, as text."""
    path = tmp_path / f"{run_id}.jsonl"
    ran = run_cli("run", "--jsonl", path, "--run-id", run_id, "--", "true", timeout=LIMIT)
    assert ran.returncode == 0, ran.stderr
    return path.read_text()


def summary(job_id: str) -> str:
    """A batch's summary of one job that passed."""
    return json.dumps({"id": job_id, "state": "succeeded", "exit_code": 0}) + "\n"


@pytest.fixture
def private(tmp_path):
    """A directory of root's the other user cannot enter, holding root's stream ``run-1.jsonl``
    and a batch's ``summary.jsonl`` naming a job of root's."""
    place = tmp_path / "private"
    place.mkdir(mode=0o700)
    (place / "run-1.jsonl").write_text(stream(tmp_path, SECRET_RUN))
    (place / "summary.jsonl").write_text(summary(SECRET_RUN))
    return place


@pytest.fixture
def theirs(tmp_path, other_user, shared):  # noqa: F811
    """Their directory (not sticky) in the shared one, holding their directory ``streams`` with
    their stream ``run-1.jsonl`` and a batch's ``summary.jsonl`` naming a job of theirs; made by
    them alone."""
    place = os.path.join(shared, "theirs")
    own = stream(tmp_path, THEIR_RUN)
    script = 'mkdir -m 0755 "$1" "$1/streams"; printf "%s" "$2" > "$1/streams/run-1.jsonl"; printf "%s" "$3" > "$1/streams/summary.jsonl"'
    as_other(other_user, script, place, own, summary(THEIR_RUN))
    return place


SWAP = 'mv "$1/streams" "$1/judged"; ln -s "$2" "$1/streams"'
HOOKS = {
    "a directory of streams, between its listing and its reads": ("processkit.report.reading:load", "run-1.jsonl"),
    "a batch's --out, between its judgement and its summary's read": ("processkit.report.batch_model:load", None),
}


@pytest.mark.parametrize("case", HOOKS)
def test_a_directory_swapped_for_their_link_after_it_was_judged_is_not_read_through_it(
    tmp_path,
    other_user,
    theirs,
    private,
    case,  # noqa: F811
):
    hook, keep = HOOKS[case]
    if keep is not None:  # a directory of streams, not a batch's: no summary in it
        as_other(other_user, 'rm "$1/streams/summary.jsonl"', theirs)
        os.unlink(private / "summary.jsonl")
    result = report_swapped(tmp_path, other_user, hook, SWAP, [theirs, private], os.path.join(theirs, "streams"))
    assert os.path.islink(os.path.join(theirs, "streams")), "the swap was made"
    page = (tmp_path / "page.html").read_text() if (tmp_path / "page.html").exists() else ""
    said = (result.stdout + result.stderr).decode()
    assert SECRET_RUN not in page + said
    assert result.returncode == 0, said
    assert THEIR_RUN in page


@pytest.fixture
def their_link(other_user, theirs, private):  # noqa: F811
    """Their link ``link -> PRIVATE/sub`` in their own (not sticky) directory: ``link/..`` is root's
    private directory."""
    (private / "sub").mkdir()
    link = os.path.join(theirs, "link")
    as_other(other_user, 'ln -s "$2" "$1"', link, private / "sub")
    return link


def test_report_their_link_then_dot_dot_is_refused_as_their_link_is(tmp_path, other_user, their_link):  # noqa: F811
    said = []
    os.mkdir(os.path.join(os.path.realpath(their_link), "x"))
    for given in [their_link, f"{their_link}/..", f"{their_link}/../run-1.jsonl", f"{their_link}/x/../.."]:
        result = run_cli("report", given, "-o", tmp_path / "page.html", timeout=LIMIT)
        refused(result, f"{their_link} is a symbolic link of uid {other_user.pw_uid}")
        assert not (tmp_path / "page.html").exists()
        said.append(result.stderr.decode().replace(given, "GIVEN", 1))  # the link is named in both
    assert said[0] == said[1], said


def test_run_input_through_their_link_then_dot_dot_is_refused(tmp_path, other_user, their_link):  # noqa: F811
    result = run_cli(
        "run",
        "--jsonl",
        tmp_path / "run.jsonl",
        "--stdin-file",
        f"{their_link}/../run-1.jsonl",
        "--",
        "cat",
        timeout=LIMIT,
    )
    refused(result, f"{their_link} is a symbolic link of uid {other_user.pw_uid}")
    assert SECRET_RUN.encode() not in result.stdout


def test_ones_own_link_then_dot_dot_is_still_followed(tmp_path, private):
    """Root's own link ``mylink -> PRIVATE/sub``: ``mylink/..`` is PRIVATE, as the kernel says."""
    (private / "sub").mkdir()
    os.unlink(private / "summary.jsonl")
    (tmp_path / "mylink").symlink_to(private / "sub")
    result = run_cli("events", "--file", tmp_path / "mylink" / ".." / "run-1.jsonl", timeout=LIMIT)
    assert result.returncode == 0 and SECRET_RUN.encode() in result.stdout, result.stderr
    result = run_cli("report", tmp_path / "mylink" / "..", "-o", tmp_path / "page.html", timeout=LIMIT)
    assert result.returncode == 0, result.stderr
    assert SECRET_RUN in (tmp_path / "page.html").read_text()


CAPTURED = {"path": "job/capture/stdout.log", "bytes": 10, "bytes_seen": 10, "bytes_written": 4, "sha256": "0" * 64}
FAILED = {
    "id": "job",
    "run_id": THEIR_RUN,
    "exit_code": 1,
    "source": "child",
    "capture": {"stdout": {**CAPTURED, "truncated": True, "write_error": False}},
}
# root's layout record for that very capture, in root's private directory: the stream's first 6 bytes dropped
ROOTS_RECORD = {
    "layout_version": 1,
    "run_id": THEIR_RUN,
    "stdout": {"sha256": "0" * 64, "bytes_seen": 10, "kept": [[6, 10]]},
}


def test_a_batch_swapped_after_its_judgement_reads_no_layout_record_through_their_link(
    tmp_path,
    other_user,
    theirs,
    private,  # noqa: F811
):
    """A failed job's truncated capture: its ``capture-keep.json`` is read inside the judged
    ``--out`` (its handle), not by the directory's name, which now leads to root's."""
    script = 'printf "%s\\n" "$2" > "$1/streams/summary.jsonl"; mkdir -p "$1/streams/job/capture"; printf tail > "$1/streams/job/capture/stdout.log"'
    as_other(other_user, script, theirs, json.dumps(FAILED))
    (private / "job" / "capture").mkdir(parents=True)
    (private / "job" / "capture" / "capture-keep.json").write_text(json.dumps(ROOTS_RECORD))
    result = report_swapped(
        tmp_path,
        other_user,
        "processkit.report.batch_model:load",
        SWAP,
        [theirs, private],
        os.path.join(theirs, "streams"),
    )
    assert os.path.islink(os.path.join(theirs, "streams")), "the swap was made"
    said = (result.stdout + result.stderr).decode()
    assert result.returncode == 0, said
    page = (tmp_path / "page.html").read_text()
    assert "tail" in page and "the stream&#39;s last" in page, page  # read as a head capture
    assert "the stream&#39;s first" not in page


@pytest.mark.parametrize("target", ["{link}/..", "{link}/../", "{link}/../.", "theirs/link/.."])
def test_ones_own_link_to_their_link_then_dot_dot_is_refused(tmp_path, other_user, shared, their_link, target):  # noqa: F811
    """Root's own link whose target ends in their link's ``..`` (``my -> THEIRLINK/..``): the
    ``..`` is the target's last component, still climbing from where their link led."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "theirs").symlink_to(os.path.dirname(their_link))  # for the relative target
    (mine / "my").symlink_to(target.format(link=their_link))
    result = run_cli("report", mine / "my", "-o", tmp_path / "page.html", timeout=LIMIT)
    refused(result, f"is a symbolic link of uid {other_user.pw_uid}")
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize("given", ["{link}", "{link}/..", "{link}/../sub"])
def test_report_capture_dir_through_their_link_is_refused_as_report_dir_is(tmp_path, other_user, their_link, given):  # noqa: F811
    """``report STREAM --capture-dir THEIRLINK`` (or ``THEIRLINK/..``) read root's capture that
    their link led to; the directory is judged as report's DIR is, and read by its handle."""
    stream = tmp_path / "run.jsonl"
    ran = run_cli("run", "--jsonl", stream, "--capture-dir", tmp_path / "cap", "--", "echo", "mine", timeout=LIMIT)
    assert ran.returncode == 0, ran.stderr
    private = os.path.dirname(os.path.realpath(their_link))
    for place in (private, os.path.join(private, "sub")):
        with open(os.path.join(place, "stdout.log"), "w") as file:
            file.write(f"{SECRET_RUN}\n")
    capture = given.format(link=their_link)
    result = run_cli("report", stream, "--capture-dir", capture, "-o", tmp_path / "page.html", timeout=LIMIT)
    refused(result, f"{their_link} is a symbolic link of uid {other_user.pw_uid}")
    assert not (tmp_path / "page.html").exists()


def their_outlink(tmp_path, user, theirs) -> tuple:
    """Their link ``outlink -> SCRATCH/sub`` into a scratch directory of this test's own (so the
    old code's write lands nowhere that matters), and a stream of root's: ``(SCRATCH, link, stream)``."""
    scratch = tmp_path / "scratch"
    (scratch / "sub").mkdir(parents=True)
    link = os.path.join(theirs, "outlink")
    as_other(user, 'ln -s "$2" "$1"', link, scratch / "sub")
    stream = str(tmp_path / "run.jsonl")
    assert run_cli("run", "--jsonl", stream, "--", "true", timeout=LIMIT).returncode == 0
    return scratch, link, stream


OUTPUTS = {
    "run --jsonl": lambda at, stream: ["run", "--jsonl", f"{at}/x.jsonl", "--", "true"],
    "run --capture-dir": lambda at, stream: [
        "run",
        "--jsonl",
        stream + ".2",
        "--capture-dir",
        f"{at}/cap",
        "--",
        "true",
    ],
    "report -o": lambda at, stream: ["report", stream, "-o", f"{at}/page.html"],
}


@pytest.mark.parametrize("output", OUTPUTS)
def test_an_output_through_their_link_then_dot_dot_is_refused(tmp_path, other_user, theirs, output):  # noqa: F811
    """``--jsonl THEIRLINK/../x``: written wherever the link's ``..`` led, a place its owner chose;
    the link is judged as an output's own link is."""
    scratch, link, stream = their_outlink(tmp_path, other_user, theirs)
    result = run_cli(*OUTPUTS[output](f"{link}/..", stream), timeout=LIMIT)
    refused(result, f"{link} is a symbolic link of uid {other_user.pw_uid}")
    assert sorted(os.listdir(scratch)) == ["sub"]


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("climb", ["{link}/x/../..", "{link}/x/../../."])
def test_an_output_through_their_link_climbed_above_later_is_refused(tmp_path, other_user, theirs, output, climb):  # noqa: F811
    """A ``..`` that leaves their link's target however late it comes (``THEIRLINK/x/../..``)."""
    scratch = tmp_path / "scratch"
    (scratch / "sub" / "x").mkdir(parents=True)
    link = os.path.join(theirs, "outlink")
    as_other(other_user, 'ln -s "$2" "$1"', link, scratch / "sub")
    stream = str(tmp_path / "run.jsonl")
    assert run_cli("run", "--jsonl", stream, "--", "true", timeout=LIMIT).returncode == 0
    result = run_cli(*OUTPUTS[output](climb.format(link=link), stream), timeout=LIMIT)
    refused(result, f"{link} is a symbolic link of uid {other_user.pw_uid}")
    assert sorted(os.listdir(scratch)) == ["sub"]


def test_an_output_climbing_out_of_report_dir_through_their_link_is_refused(tmp_path, other_user, theirs):  # noqa: F811
    """``report THEIRLINK/sub -o THEIRLINK/sub/../../page.html``: report pins its DIR, and the
    output's walk started from that pin's handle, so its ``..`` climbed above their link's target
    unjudged. Their link leads into a scratch directory of this test's own."""
    scratch = tmp_path / "scratch"
    (scratch / "deep" / "sub").mkdir(parents=True)
    (scratch / "deep" / "sub" / "run-1.jsonl").write_text(stream(tmp_path, THEIR_RUN))
    link = os.path.join(theirs, "outlink")
    as_other(other_user, 'ln -s "$2" "$1"', link, scratch / "deep")
    given = os.path.join(link, "sub")
    result = run_cli("report", given, "-o", f"{given}/../../page.html", timeout=LIMIT)
    refused(result, f"{link} is a symbolic link of uid {other_user.pw_uid}")
    assert sorted(os.listdir(scratch)) == ["deep"]
    assert sorted(os.listdir(scratch / "deep")) == ["sub"]


def test_a_dot_dot_that_stays_in_their_links_target_is_walked_as_without_it(tmp_path, other_user, theirs):  # noqa: F811
    """``THEIRLINK/x/../y`` never leaves their link's target: walked as ``THEIRLINK/y`` is (a
    directory link along the way, followed), an input's walk and an output's alike."""
    scratch = tmp_path / "scratch"
    (scratch / "sub" / "x").mkdir(parents=True)
    link = os.path.join(theirs, "outlink")
    as_other(other_user, 'ln -s "$2" "$1"', link, scratch / "sub")
    written = run_cli("run", "--jsonl", f"{link}/x/../run.jsonl", "--run-id", THEIR_RUN, "--", "true", timeout=LIMIT)
    assert written.returncode == 0, written.stderr
    assert sorted(os.listdir(scratch / "sub")) == ["run.jsonl", "x"]
    for given in [f"{link}/run.jsonl", f"{link}/x/../run.jsonl", f"{link}/x/./../x/../run.jsonl"]:
        result = run_cli("events", "--file", given, timeout=LIMIT)
        assert result.returncode == 0 and THEIR_RUN.encode() in result.stdout, (given, result.stderr)
    result = run_cli("report", f"{link}/x/..", "-o", tmp_path / "page.html", timeout=LIMIT)
    assert result.returncode == 0, result.stderr
    assert THEIR_RUN in (tmp_path / "page.html").read_text()


def test_the_sticky_directory_owners_link_then_dot_dot_is_followed(tmp_path, other_user, shared):  # noqa: F811
    """Their sticky directory and their link in it (``fs.protected_symlinks`` follows it, and so
    does the walk): ``OWNERLINK/../x`` is followed as before, an input and an output."""
    scratch = tmp_path / "scratch"
    (scratch / "sub").mkdir(parents=True)
    sticky = os.path.join(shared, "sticky")
    as_other(other_user, 'mkdir -m 1777 "$1"; ln -s "$2" "$1/ownerlink"', sticky, scratch / "sub")
    given = os.path.join(sticky, "ownerlink", "..", "run.jsonl")
    written = run_cli("run", "--jsonl", given, "--run-id", THEIR_RUN, "--", "true", timeout=LIMIT)
    assert written.returncode == 0, written.stderr
    assert sorted(os.listdir(scratch)) == ["run.jsonl", "sub"]
    result = run_cli("events", "--file", given, timeout=LIMIT)
    assert result.returncode == 0 and THEIR_RUN.encode() in result.stdout, result.stderr


def test_report_capture_dir_is_judged_only_where_the_page_uses_it(tmp_path, their_link):  # noqa: F811
    """A bench export's page reads no capture, and a missing stream is said before anything
    else: ``--capture-dir THEIRLINK`` is judged only once the stream is read, where it is used."""
    export = tmp_path / "bench.json"
    ran = run_cli("bench", "--runs", "2", "--export-json", export, "--", "true", timeout=LIMIT)
    assert ran.returncode == 0, ran.stderr
    result = run_cli("report", export, "--capture-dir", their_link, "-o", tmp_path / "page.html", timeout=LIMIT)
    assert result.returncode == 0, result.stderr
    missing = tmp_path / "missing.jsonl"
    result = run_cli("report", missing, "--capture-dir", their_link, "-o", tmp_path / "page2.html", timeout=LIMIT)
    refused(result, f"cannot read the events stream {missing}")
    assert b"--capture-dir" not in result.stderr


def test_report_capture_dir_swapped_after_its_judgement_is_read_from_its_handle(tmp_path, other_user, theirs, private):  # noqa: F811
    """Their ``--capture-dir`` swapped for their link to root's directory just before the page is
    drawn (the hook at ``render.single_page``): the capture read is still theirs, from the handle."""
    stream = tmp_path / "run.jsonl"
    ran = run_cli("run", "--jsonl", stream, "--capture-dir", tmp_path / "cap", "--", "echo", "mine", timeout=LIMIT)
    assert ran.returncode == 0, ran.stderr
    as_other(other_user, 'mkdir "$1/cap"; printf "%s\\n" "$2" > "$1/cap/stdout.log"', theirs, THEIR_RUN)
    (private / "stdout.log").write_text(f"{SECRET_RUN}\n")
    swap = 'mv "$1/cap" "$1/judged"; ln -s "$2" "$1/cap"'
    capture = os.path.join(theirs, "cap")
    result = report_swapped(
        tmp_path,
        other_user,
        "processkit.report.render:single_page",
        swap,
        [theirs, private],
        stream,
        "--capture-dir",
        capture,
    )
    assert os.path.islink(capture), "the swap was made"
    said = (result.stdout + result.stderr).decode()
    assert result.returncode == 0, said
    page = (tmp_path / "page.html").read_text()
    assert SECRET_RUN not in page + said
    assert THEIR_RUN in page


WRITERS = {
    "run --jsonl (open_for_writing)": lambda out, stream: ["run", "--jsonl", out, "--", "true"],
    "report -o (write_output)": lambda out, stream: ["report", stream, "-o", out],
}


@pytest.mark.parametrize("writer", WRITERS)
def test_ones_own_output_link_to_their_link_then_dot_dot_is_refused(tmp_path, other_user, theirs, writer):  # noqa: F811
    """``-o mine`` with one's own ``mine -> THEIRLINK/..``: every output judges the ``..`` that ends
    the target as a later one (their link named), and none names the runner's own ``/proc`` path."""
    scratch, link, stream = their_outlink(tmp_path, other_user, theirs)
    (tmp_path / "mine").symlink_to(f"{link}/..")
    result = run_cli(*WRITERS[writer](tmp_path / "mine", stream), timeout=LIMIT)
    refused(result, f"{link} is a symbolic link of uid {other_user.pw_uid}")
    assert b"/proc/" not in result.stderr
    assert sorted(os.listdir(scratch)) == ["sub"]
