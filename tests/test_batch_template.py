"""``batch -- CMD ARG... ::: A B C``: GNU parallel's command templates, through the real CLI.

Each job's argv is what the child itself saw (it writes it down), so "substituted into argv
elements, never a shell" is checked byte for byte; ``--dry-run``'s lines are the manifest the
template expands to and nothing else happens.
"""

from __future__ import annotations

import json
import os

from conftest import run_cli
from streams import PY

USAGE, SETUP = 100, 111
# A child that writes its argv (as the OS's bytes, hex) into $ARGV_DIR/<its first argument's hex>.
RECORD = (
    "import os,sys\n"
    "args=[os.fsencode(a).hex() for a in sys.argv[1:]]\n"
    "open(os.path.join(os.environ['ARGV_DIR'], args[0] or 'empty'), 'w').write(' '.join(args))\n"
)


def seen(directory) -> dict[bytes, list[bytes]]:
    """What each recording child saw, by its first argument."""
    found = {}
    for name in os.listdir(directory):
        args = [bytes.fromhex(item) for item in (directory / name).read_text().split(" ")]
        found[args[0]] = args
    return found


def recording(tmp_path, record, *words, **kwargs):
    """A batch of the recording child, with the template's ``words`` after its program."""
    options = ["--out", tmp_path / "out", "--env", f"ARGV_DIR={record}"]
    return run_cli("batch", *options, "--", PY, "-c", RECORD, *words, **kwargs)


def dry(*words, stdin: bytes | None = None) -> list[dict]:
    result = (
        run_cli("batch", "--dry-run", *words, input=stdin, stdin=None)
        if stdin is not None
        else run_cli("batch", "--dry-run", *words)
    )
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.decode().splitlines()]


def test_an_argument_stays_one_element_byte_for_byte_and_no_shell_sees_it(tmp_path):
    record = tmp_path / "argv"
    record.mkdir()
    hostile = ["two words", "'quoted' \"twice\"", f"$(touch {tmp_path}/pwned)", "back`tick`", "semi;colon|pipe"]
    result = recording(tmp_path, record, "{}", "x{}y", ":::", *hostile)
    assert result.returncode == 0, result.stderr
    by_first = seen(record)
    assert sorted(by_first) == sorted(value.encode() for value in hostile)
    for value in hostile:
        assert by_first[value.encode()] == [value.encode(), f"x{value}y".encode()]
    assert not (tmp_path / "pwned").exists()
    lines = [json.loads(line) for line in (tmp_path / "out" / "summary.jsonl").read_text().splitlines()]
    assert len({line["id"] for line in lines}) == len(hostile) and all(line["exit_code"] == 0 for line in lines)


def test_stdin_lines_are_the_arguments_and_a_line_that_is_not_utf8_keeps_its_bytes(tmp_path):
    record = tmp_path / "argv"
    record.mkdir()
    lines = b"plain\nwith space\n\xff\xfe raw\n"
    result = recording(tmp_path, record, input=lines, stdin=None)
    assert result.returncode == 0, result.stderr
    assert seen(record) == {b"plain": [b"plain"], b"with space": [b"with space"], b"\xff\xfe raw": [b"\xff\xfe raw"]}


def test_replacement_strings_cut_paths_as_parallel_does():
    lines = dry(
        "--", "cc", "{}", "{.}", "{/}", "{//}", "{/.}", "{#}", ":::", "src/lib.v1/a.tar.gz", "b.c", "dir.x/noext"
    )
    assert [line["args"] for line in lines] == [
        ["cc", "src/lib.v1/a.tar.gz", "src/lib.v1/a.tar", "a.tar.gz", "src/lib.v1", "a.tar", "1"],
        ["cc", "b.c", "b", "b.c", ".", "b", "2"],
        ["cc", "dir.x/noext", "dir.x/noext", "noext", "dir.x", "noext", "3"],
    ]


def test_several_sources_give_every_combination_and_linked_ones_go_pairwise(tmp_path):
    both = dry("--", "echo", "{2}-{1}", ":::", "a", "b", ":::", "1", "2")
    assert [line["args"] for line in both] == [["echo", "1-a"], ["echo", "2-a"], ["echo", "1-b"], ["echo", "2-b"]]
    linked = dry("--", "echo", "{1}", "{2}", ":::", "a", "b", ":::+", "1", "2")
    assert [line["args"] for line in linked] == [["echo", "a", "1"], ["echo", "b", "2"]]
    argfile = tmp_path / "args"
    argfile.write_text("x\ny\n")
    from_file = dry("--", "echo", ":::", "p", "::::", str(argfile))  # no replacement string: appended
    assert [line["args"] for line in from_file] == [["echo", "p", "x"], ["echo", "p", "y"]]
    mismatch = run_cli("batch", "--dry-run", "--", "echo", ":::", "a", "b", ":::+", "1")
    assert mismatch.returncode == USAGE and b"different lengths" in mismatch.stderr


def test_ids_are_safe_unique_and_within_the_grammar():
    lines = dry("--", "true", ":::", "a b", "a_b", "../up", "summary.jsonl", "", "x" * 300, "ünï", "a b", "a_b-2")
    ids = [line["id"] for line in lines]
    assert len(set(ids)) == len(ids)
    assert ids[:5] == ["a_b", "a_b-2", "up", "job-summary.jsonl", "job"]
    import re

    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", job_id) for job_id in ids)
    named = dry("--id", "t{#}-{/.}", "--", "true", ":::", "d/a.c", "d/b.c")
    assert [line["id"] for line in named] == ["t1-a", "t2-b"]


def test_dry_run_prints_the_manifest_with_the_batchs_keys_and_makes_nothing(tmp_path):
    out = tmp_path / "out"
    marker = tmp_path / "ran"
    flags = ["--dry-run", "--out", out, "--env", "A=1", "--timeout", "5s", "--cwd", tmp_path]
    result = run_cli("batch", *flags, "--", "touch", marker, ":::", "one")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "args": ["touch", str(marker), "one"],
        "id": "one",
        "cwd": str(tmp_path),
        "env": ["A=1"],
        "timeout": "5s",
    }
    assert not out.exists() and not marker.exists()
    # The printed manifest runs as the template does.
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(result.stdout)
    assert run_cli("batch", manifest, "--out", out).returncode == 0 and marker.exists()


def test_the_batchs_flags_reach_every_job(tmp_path):
    record = tmp_path / "argv"
    record.mkdir()
    code = "import os,sys; open(os.path.join(os.environ['ARGV_DIR'], sys.argv[1]), 'w').write(os.environ['GREETING'] + ' ' + os.getcwd())"
    result = run_cli(
        "batch",
        "--out",
        tmp_path / "out",
        "--env",
        f"ARGV_DIR={record}",
        "--env",
        "GREETING=hi",
        "--cwd",
        tmp_path,
        "--",
        PY,
        "-c",
        code,
        ":::",
        "a",
        "b",
    )
    assert result.returncode == 0, result.stderr
    assert (record / "a").read_text() == f"hi {tmp_path}" and (record / "b").read_text() == f"hi {tmp_path}"


def test_the_slot_string_names_a_slot_free_while_the_job_runs(tmp_path):
    # Each job holds its slot's lock file while it runs: two jobs with one slot number would collide.
    code = (
        "import fcntl,os,sys,time\n"
        "f=open(os.path.join(sys.argv[2], 'slot'+sys.argv[1]), 'a')\n"
        "fcntl.flock(f, fcntl.LOCK_EX|fcntl.LOCK_NB)\n"
        "f.write(sys.argv[3]+'\\n'); f.flush(); time.sleep(0.05)\n"
    )
    result = run_cli(
        "batch",
        "--jobs",
        "3",
        "--out",
        tmp_path / "out",
        "--",
        PY,
        "-c",
        code,
        "{%}",
        tmp_path,
        "{}",
        ":::",
        *map(str, range(12)),
    )
    assert result.returncode == 0, result.stderr
    slots = sorted(name for name in os.listdir(tmp_path) if name.startswith("slot"))
    assert set(slots) <= {"slot1", "slot2", "slot3"} and slots
    assert sorted(line for name in slots for line in (tmp_path / name).read_text().split()) == sorted(
        map(str, range(12))
    )


def test_a_bad_template_or_flag_is_a_usage_error_and_a_missing_file_a_setup_error(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"args": ["true"]}\n')
    empty_cwd = tmp_path / "empty-cwd.jsonl"
    empty_cwd.write_text(json.dumps({"args": ["touch", str(tmp_path / "ran")], "cwd": ""}) + "\n")
    for words, message in (
        ((manifest, "--", "true", ":::", "a"), b"not both"),
        ((manifest, "--env", "A=1"), b"belongs to a command template"),
        (("--", "echo", "{3}", ":::", "a"), b"input source 3"),
        (("--", "echo", "{2}", ":::", "a", "b"), b"input source 2, and there is only 1 input source\n"),
        (("--", ":::", "a"), b"names no program"),
        (("--", "echo", ":::+", "a"), b"no"),
        (("--id", "{%}", "--", "echo", ":::", "a"), b"--id cannot use {%}"),
        ((manifest, "--cwd", ""), b"belongs to a command template"),  # given, though empty
        # a template flag named as run names it (before: "job 1: ... for 'cwd'"), the key a line's
        (
            ("--cwd", "", "-j", "2", "--", "touch", tmp_path / "ran", ":::", "a", "b"),
            b"cli: invalid value '' for '--cwd'",
        ),
        (("--env-file", "", "--", "touch", tmp_path / "ran", ":::", "a"), b"cli: invalid value '' for '--env-file'"),
        ((empty_cwd,), b"manifest line 1: invalid value '' for 'cwd'"),
    ):
        result = run_cli("batch", "--out", tmp_path / "out", *words)
        assert result.returncode == USAGE and message in result.stderr, (words, result.stderr)
    missing = run_cli("batch", "--out", tmp_path / "out", "--", "echo", "::::", tmp_path / "absent")
    assert missing.returncode == SETUP and b"cannot read the argument file" in missing.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "ran").exists()


def test_dash_j_is_jobs_as_parallel_make_and_nextest_spell_it(tmp_path):
    """``-j N`` and ``-jN`` (GNU parallel's, make's, nextest's spelling) set the jobs at once: the
    slot replacement string ``{%}`` never exceeds them; ``-j 5000`` is refused as ``--jobs 5000`` is."""
    record = tmp_path / "seen"
    record.mkdir()
    for flag in (["-j", "2"], ["-j2"]):
        done = run_cli(
            "batch",
            *flag,
            "--out",
            tmp_path / "out",
            "--env",
            f"ARGV_DIR={record}",
            "--",
            PY,
            "-c",
            RECORD,
            "{}",
            "{%}",
            ":::",
            *[f"{flag[-1]}-{n}" for n in range(6)],
        )
        assert done.returncode == 0, done.stderr
    slots = {args[1] for args in seen(record).values()}
    assert len(seen(record)) == 12 and slots <= {b"1", b"2"}, slots
    refused = run_cli("batch", "-j", "5000", "--out", tmp_path / "out0", "--", "true", ":::", "a")
    assert refused.returncode == USAGE and b"--jobs" in refused.stderr
