"""What a GNU parallel, make or nextest user types from habit, given to ``batch``: one line that
names whose flag it is and what stands for it here (exit 100, nothing run), where argparse said
only "unrecognized arguments" and printed the usage. And a template given no inputs says so, not
that a manifest it never had is empty."""

from __future__ import annotations

import json
import os

import pytest

from conftest import run_cli
from processkit.text import cut

USAGE = 100
POINTERS = {
    ("--halt", "now,fail=1"): b"--halt is GNU parallel's; here its soon,fail=1 is --halt-on-failure",
    ("--halt=soon,fail=1",): b"--halt is GNU parallel's; here its soon,fail=1 is --halt-on-failure",
    # parallel's own default, never to be told to use --halt-on-failure (it once was)
    ("--halt", "never"): b"--halt is GNU parallel's; here its soon,fail=1 is --halt-on-failure (the running jobs "
    b"finish) and its never (0) is the default, as in parallel: drop it; for its now,fail=1, send the batch SIGTERM\n",
    ("--joblog", "log.tsv"): b"--joblog is GNU parallel's; here every job's line is in OUT/summary.jsonl",
    ("--results", "res"): b"--results is GNU parallel's; here each job's output is kept in OUT/ID/capture/",
    ("-k",): b"-k is GNU parallel's --keep-order or make's --keep-going: as --keep-order, here --show-output",
    ("--keep-order",): b"--keep-order is GNU parallel's; here --show-output",
    ("--fail-fast",): b"--fail-fast is nextest's; here it is --halt-on-failure",
    ("--no-fail-fast",): b"--no-fail-fast is nextest's; here it is the default",
    ("--keep-going",): b"--keep-going is make's; here it is the default",
    ("--tag",): b"--tag is GNU parallel's; here --show-output prints each job's output whole under",
    ("--line-buffer",): b"--line-buffer is GNU parallel's; here --show-output",
    ("--group",): b"--group is GNU parallel's; here it is --show-output (each job's output whole as it ends); "
    b"a manifest's groups are limited with --group-limit NAME=N",
    ("--ungroup",): b"--ungroup is GNU parallel's; here --show-output",
    (
        "--bar",
    ): b"--bar is GNU parallel's; here the progress bar is drawn whenever stderr is a terminal (not under TERM=dumb)",
    ("--eta",): b"--eta is GNU parallel's; here the progress bar, with its ETA,",
    ("--progress",): b"--progress is GNU parallel's; here the progress bar",
    ("--max-procs", "2"): b"--max-procs is GNU parallel's and xargs'; here it is -j/--jobs",
    ("-P", "2"): b"-P is GNU parallel's and xargs' --max-procs; here it is -j/--jobs",
    ("-P2",): b"-P is GNU parallel's and xargs' --max-procs; here it is -j/--jobs",
    ("--test-threads=2",): b"--test-threads is nextest's; here it is -j/--jobs",
    ("--failure-output", "final"): b"--failure-output is nextest's; here each failed job is named at the end",
    ("--success-output=final",): b"--success-output is nextest's; here --show-output",
    ("--final-status-level", "fail"): b"--final-status-level is nextest's; here each failed job is named at the end",
    ("--null",): b"--null is GNU parallel's and xargs'; here an argument is a line",
    ("-0",): b"-0 is GNU parallel's and xargs' --null; here an argument is a line",  # a MANIFEST to argparse
    ("--will-cite",): b"--will-cite is GNU parallel's; nothing here asks to be cited: drop it\n",
    ("--colsep", "\t"): b"--colsep is GNU parallel's; here a line is one argument: give each column as a file",
    ("--arg-file=list.txt",): b"--arg-file is GNU parallel's and xargs'; here it is :::: FILE\n",
    ("-a", "list.txt"): b"-a is GNU parallel's and xargs' --arg-file; here it is :::: FILE\n",
    ("-q",): b"-q is GNU parallel's --quote; here no shell runs a job",
    ("--quote",): b"--quote is GNU parallel's; here no shell runs a job",
    ("--lb",): b"--lb is GNU parallel's --line-buffer; here --show-output",
    ("-n2",): b"-n is GNU parallel's and xargs' --max-args or make's --just-print: as --max-args, none here: a job "
    b"takes one argument of each source",
    ("-N", "2"): b"-N is GNU parallel's --max-replace-args; none here: a job takes one argument",
    ("-X",): b"-X is GNU parallel's (as many arguments as fit one command line); none here",
    ("-m",): b"-m is GNU parallel's (as many arguments as fit one command line); none here",
    ("--xargs",): b"--xargs is GNU parallel's; none here: a job takes one argument",
    ("--pipe",): b"--pipe is GNU parallel's; none here: no job reads a block of the batch's stdin",
    ("--block", "1M"): b"--block is GNU parallel's --block-size; none here",
    ("-I", "{}"): b"-I is GNU parallel's and xargs' --replace; here it is {}",
    ("-I@@",): b"-I is GNU parallel's and xargs' --replace; here it is {}",
    ("-i",): b"-i is GNU parallel's and xargs' --replace or make's --ignore-errors: as --replace, here it is {}",
    ("-i@@",): b"-i is GNU parallel's and xargs' --replace or make's --ignore-errors: as --replace, here it is {}",
    ("--verbose",): b"--verbose is GNU parallel's and xargs' (xargs' -t: each command on stderr); here --dry-run",
    ("--delay", "1"): b"--delay is GNU parallel's; none here: a job starts as soon as a slot is free",
    ("--load", "80%"): b"--load is GNU parallel's; none here: no job waits for the machine's load",
    ("--memfree", "1G"): b"--memfree is GNU parallel's; here --memory-budget SIZE",
    ("-S", "host"): b"-S is GNU parallel's --sshlogin; here --dask-scheduler ADDRESS",
    ("--shuf",): b"--shuf is GNU parallel's; none here: the jobs start in their input's order",
    ("--resume-failed",): b"--resume-failed is GNU parallel's; here it is --resume",
    ("--tagstring", "{}"): b"--tagstring is GNU parallel's; here --show-output's header names each job by its id",
    ("-v",): b"-v is GNU parallel's --verbose; here --dry-run prints each job",
    ("--workdir", "."): b"--workdir is GNU parallel's; here it is --cwd DIR",
    ("-r",): b"-r is GNU parallel's and xargs' --no-run-if-empty; no input makes no job here already, but a blank "
    b"line is a job",
    ("-d", ","): b"-d is GNU parallel's and xargs' --delimiter; here an argument is a line",
    ("--just-print",): b"--just-print is make's; none for a MANIFEST, whose lines are the jobs already (--dry-run "
    b"prints a command template's jobs as manifest lines, and refuses a MANIFEST)\n",
    ("--recon",): b"--recon is make's --just-print; none for a MANIFEST",
    ("-n",): b"-n is GNU parallel's and xargs' --max-args or make's --just-print: as --max-args, none here: a job "
    b"takes one argument of each source ({1} {2} ..., :::+ links two sources pairwise), never several (a manifest "
    b"line's args may hold any number); as --just-print, none for a MANIFEST",
    ("-f", "m.jsonl"): b"-f is make's --file; here the MANIFEST names the jobs (one JSON line each)",
    ("-fm.jsonl",): b"-f is make's --file; here the MANIFEST names the jobs",
    ("-C", "sub"): b"-C is GNU parallel's --colsep or make's --directory: as --colsep, here a line is one argument: "
    b"give each column as a file, linked with ::::+; as --directory, here run the batch from DIR (cd DIR first), "
    b"or give a manifest line a cwd (a command template's jobs: --cwd DIR)\n",
    ("-l", "4"): b"-l is GNU parallel's and xargs' --max-lines or make's --load-average: as --max-lines, none here",
    ("-O",): b"-O is make's --output-sync; here --show-output prints each job's output whole as it ends, never "
    b"interleaved\n",
    ("--output-sync=target",): b"--output-sync is make's; here --show-output prints each job's output whole",
    ("-x",): b"-x is GNU parallel's and xargs' (stop when a command line passes -s's size); here a job whose "
    b"command passes 1 MiB is always refused",
    ("-B",): b"-B is make's --always-make; here every job runs, unless --resume skips",
    ("--ignore-errors",): b"--ignore-errors is make's; none here: every job runs after a failure by default",
    ("--no-capture",): b"--no-capture is nextest's; here no job's output reaches the terminal as it is written",
    ("--max-fail=3",): b"--max-fail is nextest's; here --halt-on-failure starts no job after the first failure",
    ("--message-format", "libtest-json"): b"--message-format is nextest's; here every job's line is in OUT/summary",
}


@pytest.mark.parametrize("given", list(POINTERS), ids=lambda given: "".join(given))
def test_a_peers_flag_points_to_ours_in_one_line(tmp_path, given):
    result = run_cli("batch", "--out", tmp_path / "out", *given, "--", "touch", tmp_path / "ran", ":::", "a")
    assert result.returncode == USAGE, result.stderr
    assert result.stderr.startswith(b"processkit-cli: " + POINTERS[given]), result.stderr
    assert result.stderr.count(b"\n") == 1, "one line: no usage, no traceback"
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_minus_0_with_no_template_points_to_ours_too(tmp_path):
    # ``batch -0 < m.jsonl``: argparse took -0 for the MANIFEST, a file it then could not read (111)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": ["touch", str(tmp_path / "ran")]}) + "\n")
    with manifest.open("rb") as stdin:
        result = run_cli("batch", "--out", tmp_path / "out", "-0", stdin=stdin)
    assert result.returncode == USAGE, result.stderr
    assert result.stderr.startswith(b"processkit-cli: " + POINTERS[("-0",)]) and result.stderr.count(b"\n") == 1
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_a_flag_of_no_peer_keeps_the_parsers_words(tmp_path):
    result = run_cli("batch", "--nonesuch", "--", "true", ":::", "a")
    assert result.returncode == USAGE
    assert result.stderr.startswith(b"processkit-cli: unrecognized arguments: --nonesuch\nusage:")


def test_a_template_flag_after_the_separator_is_the_commands(tmp_path):
    """``-k`` after ``--`` is the command's own argument, never taken for a peer's flag."""
    result = run_cli("batch", "--out", tmp_path / "out", "--", "echo", "-k", ":::", "a")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1].startswith(b"batch: 1 of 1 job exited 0; ")  # then where it printed
    assert (tmp_path / "out" / "a" / "capture" / "stdout.log").read_bytes() == b"-k a\n"


def test_a_peers_flag_in_a_template_without_the_separator_names_the_likely_mistake(tmp_path):
    """``batch grep -k x ::: a``: the ``-k`` is grep's, and the ``--`` before the command is
    missing. The pointer to ours alone read as if the flag were meant for the batch; with a
    ``:::`` or ``::::`` after the flag it says the likely mistake too."""
    for source in (":::", "::::"):
        result = run_cli("batch", "--out", tmp_path / "out", "grep", "-k", "x", source, "a")
        assert result.returncode == USAGE, result.stderr
        said = result.stderr.decode()
        assert said.startswith("processkit-cli: -k is GNU parallel's"), said
        assert said.endswith(" (if -k is your command's, put -- before the command)\n"), said
        assert said.count("\n") == 1
    result = run_cli("batch", "-k", "--out", tmp_path / "out", "--", "grep", "x", ":::", "a")
    assert not result.stderr.decode().endswith("put -- before the command)\n"), "-- given: the flag is the batch's"


@pytest.mark.parametrize("source", [":::", "::::", ":::+", "::::+"])
def test_a_template_without_the_separator_says_where_it_goes(tmp_path, source):
    """``batch echo {} ::: a b``, GNU parallel's way: ``echo`` was read as the MANIFEST and argparse
    said only "unrecognized arguments: {} ::: a b" and the usage; one line now says the template
    goes after ``--``, and nothing runs."""
    result = run_cli("batch", "--out", tmp_path / "out", "touch", tmp_path / "ran-{}", source, "a")
    assert result.returncode == USAGE, result.stderr
    said = (
        f"processkit-cli: {source} follows a command template, which goes after --: processkit-cli batch "
        f"[OPTIONS] -- CMD [ARG]... {source} ... (GNU parallel takes the command without --; here its first "
        "word is the MANIFEST)\n"
    )
    assert result.stderr == said.encode()
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob("ran-*"))


MAKES_J = b"(make's -j alone, no limit, is -j 0: as many as the open-file limit allows)\n"


@pytest.mark.parametrize("flag", ["-j", "--jobs"])
def test_makes_j_with_no_count_says_ours_takes_one(tmp_path, flag):
    """``make -j`` (no limit) typed here: argparse said "expected one argument" and the usage, and
    ``-j m.jsonl`` took the manifest for the count and then said a MANIFEST is required, though
    one was given. Each is one line naming -j's count and make's meaning (-j 0); nothing runs."""
    (tmp_path / "m.jsonl").write_text('{"id": "a", "args": ["touch", "%s"]}\n' % (tmp_path / "ran"))
    result = run_cli("batch", "--out", tmp_path / "out", flag, "--", "touch", tmp_path / "ran", ":::", "a")
    assert result.returncode == USAGE, result.stderr
    assert result.stderr == f"processkit-cli: {flag} needs a count here ".encode() + MAKES_J
    result = run_cli("batch", "--out", tmp_path / "out", flag, tmp_path / "m.jsonl")
    assert result.returncode == USAGE, result.stderr
    took = f"processkit-cli: {flag} took '{cut(str(tmp_path / 'm.jsonl'))}' as its count, leaving no MANIFEST "
    assert result.stderr == took.encode() + MAKES_J
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_a_template_with_no_inputs_says_so(tmp_path):
    """No ``:::`` and an empty stdin: the template's user is told no inputs came and where they go,
    not that "the manifest" (which they never wrote) has no jobs; exit 0, as parallel's."""
    result = run_cli("batch", "--out", tmp_path / "out", "--", "echo")
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        b"batch: no inputs: no ::: or :::: source and no lines on stdin (give arguments after :::, or pipe them in)\n"
    )
    (tmp_path / "empty").write_bytes(b"")
    result = run_cli("batch", "--out", tmp_path / "out", "--", "echo", "::::", tmp_path / "empty")
    assert result.returncode == 0, result.stderr
    assert result.stderr == b"batch: no inputs: a :::: source gave no lines, so no job was made\n"


@pytest.mark.parametrize("bundle", ["-kj2", "-kq", "-k2"])
def test_a_peers_short_flag_bundled_points_to_ours_as_alone(tmp_path, bundle):
    """GNU parallel's ``-kj2`` (``-k -j2`` bundled, as getopt reads it) got argparse's generic
    "unrecognized arguments" and the usage, where ``-k -j2`` got the pointer: a bundle is now read
    letter by letter, up to one of ours that takes a value."""
    result = run_cli("batch", "--out", tmp_path / "out", bundle, "--", "touch", tmp_path / "ran", ":::", "a")
    assert result.returncode == USAGE, result.stderr
    assert result.stderr.startswith(b"processkit-cli: " + POINTERS[("-k",)]), result.stderr
    assert result.stderr.count(b"\n") == 1, "one line: no usage, no traceback"
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_a_bundle_whose_k_is_a_value_of_ours_is_no_peers_flag(tmp_path):
    """``-j2k``: ``-j``'s value is ``2k``, as getopt and argparse read it; no pointer to ``-k``."""
    result = run_cli("batch", "--out", tmp_path / "out", "-j2k", "--", "true", ":::", "a")
    assert result.returncode == USAGE, result.stderr
    assert b"-k is GNU parallel's" not in result.stderr


@pytest.mark.parametrize("bundle", ["-dk", "-Sworker1", "-Iwork", "-ek", "-ik", "-Jwork"])
def test_a_bundle_whose_k_is_a_value_of_parallels_is_no_peers_flag(tmp_path, bundle):
    """GNU parallel reads its own value-taking short flags as getopt does: ``-dk`` is ``-d k``,
    ``-Sworker1`` is ``-S worker1``. The k there is a value, not ``-k``: the pointer to
    ``--show-output`` was wrong. A flag with a pointer of its own (``-d``, ``-S``, ``-I``, ``-i``) gets
    that one (every short flag of parallel's has one)."""
    result = run_cli("batch", "--out", tmp_path / "out", bundle, "--", "touch", tmp_path / "ran", ":::", "a")
    assert result.returncode == USAGE, result.stderr
    assert result.stderr.startswith(f"processkit-cli: {bundle[:2]} is GNU parallel's".encode()), result.stderr
    assert result.stderr.count(b"\n") == 1
    assert b"-k is GNU parallel's" not in result.stderr
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_the_bundle_reading_knows_every_short_flag_of_ours_that_takes_a_value():
    """A bundle is read up to a short flag of ours that takes a value, as the parser declared it
    (``Parser.takes_value``, no table kept beside it): every such flag ``batch --help`` lists."""
    import re
    import string

    from processkit.cli.batch import build_parser

    listed = run_cli("batch", "--help")
    assert listed.returncode == 0, listed.stderr
    valued = set(re.findall(r"^ {2}-([A-Za-z]) [A-Z]", listed.stdout.decode(), re.MULTILINE))
    parser = build_parser()
    assert valued == {letter for letter in string.ascii_letters if parser.takes_value(f"-{letter}")}
    assert valued, listed.stdout


SHELL_LINE = (
    "is one word with spaces, and no shell runs a job (GNU parallel's runs one): give its words apart, or "
    "write -- sh -c '...' sh {} (the argument as \"$1\")\n"
)


def test_a_shell_line_as_the_template_says_the_way_when_its_jobs_fail(tmp_path):
    """``batch -- 'touch {}.x' ::: a``, as GNU parallel's shell reads it: the whole line is the
    program, and each job fails 101 "not found on PATH"; the end of the batch says the way once,
    naming ``sh -c``. Nothing is refused before: only the spawn, on the job's own PATH, knows."""
    result = run_cli("batch", "--out", tmp_path / "out", "--", f"touch {tmp_path}/{{}}.x", ":::", "a", "b")
    assert result.returncode == 117, result.stderr
    said = result.stderr.decode()
    assert said.count(SHELL_LINE) == 1, said
    named = [f"batch: the program 'touch {tmp_path}/{arg}.x' {SHELL_LINE}" in said for arg in "ab"]
    assert named.count(True) == 1, said  # the first job that failed so (two run side by side)
    assert not (tmp_path / "a.x").exists() and not (tmp_path / "b.x").exists()
    bare = run_cli("batch", "--out", tmp_path / "out3", "--", "gzip -k {}", ":::", "a")  # "not found on PATH"
    assert bare.returncode == 117 and f"batch: the program 'gzip -k a' {SHELL_LINE}" in bare.stderr.decode(), (
        bare.stderr
    )
    result = run_cli("batch", "--out", tmp_path / "out2", "--", "false", ":::", "a")
    assert result.returncode == 117 and SHELL_LINE not in result.stderr.decode(), "no shell line, no pointer"


def test_a_shell_line_in_a_manifest_is_told_the_manifests_way(tmp_path):
    """A manifest line's ``"args": ["make test"]`` was told the template's way (``-- sh -c '...'
    sh {}``, GNU parallel's shell), which a manifest has no place for: it is told its ``"args"``."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"id": "t", "args": ["pk-no-such make test"]}\n')
    result = run_cli("batch", manifest, "--out", tmp_path / "out")
    assert result.returncode == 117, result.stderr
    assert result.stderr.decode().splitlines()[-2] == (
        "batch: the program 'pk-no-such make test' is one word with spaces, and no shell runs a job: give its "
        'words apart in its "args", or run one: "args": ["sh", "-c", "..."]'
    )


def test_a_program_with_spaces_on_the_jobs_own_path_runs(tmp_path):
    """A program named with a space runs wherever the job's PATH, read from the job's --cwd,
    holds it, as the spawn finds it: set by --env (also under --env-clear), or a relative entry
    under --cwd. ``--dry-run`` prints such a template's lines."""
    spaced = tmp_path / "my bin"
    (tmp_path / "c" / "bin").mkdir(parents=True)
    spaced.mkdir()
    for where in (spaced, tmp_path / "c" / "bin"):
        program = where / "my tool"
        program.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran-$1\n")
        program.chmod(0o755)
    path = f"PATH={spaced}:/usr/bin:/bin"
    for extra, word in ((["--env", path], "env"), (["--env-clear", "--env", path], "clear")):
        result = run_cli("batch", "--out", tmp_path / word, *extra, "--", "my tool", "{}", ":::", word)
        assert result.returncode == 0, result.stderr
    env = {**os.environ, "PATH": f"bin:{os.environ['PATH']}"}
    result = run_cli(
        "batch", "--out", tmp_path / "o", "--cwd", tmp_path / "c", "--", "my tool", "cwd", ":::", "a", env=env
    )
    assert result.returncode == 0, result.stderr
    assert all((tmp_path / f"ran-{word}").exists() for word in ("env", "clear", "cwd"))
    result = run_cli("batch", "--dry-run", "--", "gzip {} > {}.gz", ":::", "a")
    assert result.returncode == 0, result.stderr
    assert b'"args":["gzip a > a.gz"]' in result.stdout


@pytest.mark.parametrize(
    "given", [("--out", ":::"), ("--junit", ":::"), ("--history", ":::"), ("--id", "-P {}"), ("--cwd", "-P dir")]
)
def test_a_flags_value_that_looks_like_a_habit_is_that_value(tmp_path, given):
    """``--out ::: -`` (a directory named ``:::``, the manifest on stdin), ``--id '-P {}'``,
    ``--cwd '-P dir'``: argparse takes each as the flag's value and the line runs, so no pointer
    to a peer's habit (a template with no --, parallel's -P) refuses it."""
    flag, value = given
    if flag == "--history":
        (tmp_path / value).write_text("")  # an empty summary: no times
    if flag == "--cwd":
        (tmp_path / value).mkdir()
    (tmp_path / "m.jsonl").write_text('{"id": "a", "args": ["touch", "%s"]}\n' % (tmp_path / "ran"))
    out = [] if flag == "--out" else ["--out", "out"]
    jobs = ["-"] if value == ":::" else ["--", "touch", tmp_path / "ran", ":::", "a"]
    with open(tmp_path / "m.jsonl", "rb") as manifest:
        result = run_cli("batch", *out, flag, value, *jobs, cwd=tmp_path, stdin=manifest)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "ran").exists()
    if flag in ("--out", "--junit"):
        assert (tmp_path / ":::").exists()


@pytest.mark.parametrize("given", [("--label", ":::"), ("--cwd", ":::"), ("--id", "-P {}")])
def test_a_template_flags_value_that_looks_like_a_habit_is_that_value_on_a_refused_line(tmp_path, given):
    """A line argparse refuses for its own reason (``--bogus``) gets argparse's words, not a
    pointer read from the value of one of the template's flags (declared in a group of their
    own): ``--label :::`` is no template source, ``--id '-P {}'`` no parallel -P."""
    flag, value = given
    result = run_cli("batch", flag, value, "m.jsonl", "--bogus", cwd=tmp_path)
    assert result.returncode == USAGE, result.stderr
    assert b"unrecognized arguments: --bogus" in result.stderr, result.stderr


def test_makes_j_before_another_flag_says_ours_takes_a_count(tmp_path):
    """``-j --out o`` (make's -j with no count, another flag next) and ``--jobs=m.jsonl``: one
    line naming -j's count, as ``-j`` last and ``-j m.jsonl`` have it, not the usage or "a
    MANIFEST is required"."""
    result = run_cli("batch", "-j", "--out", tmp_path / "out", "--", "touch", tmp_path / "ran", ":::", "a")
    assert result.returncode == USAGE, result.stderr
    assert result.stderr == b"processkit-cli: -j needs a count here " + MAKES_J
    result = run_cli("batch", "--out", tmp_path / "out", "--jobs=m.jsonl", cwd=tmp_path)
    assert result.returncode == USAGE, result.stderr
    assert result.stderr == b"processkit-cli: --jobs took 'm.jsonl' as its count, leaving no MANIFEST " + MAKES_J
    assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()
