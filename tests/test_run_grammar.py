"""One grammar for a run, wherever it is described (issue 34 §4): the same value is refused the
same way by ``run``'s command line, the API's keywords and a manifest line, each naming the
option in its own words (``--max-processes``, ``max_processes=``, ``max_processes``); the API
builds its RunSpec as the CLI does, without a command line; the grammar package sits below
every describer of a run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import processkit
from conftest import SAFETY_NET, cli_command, run_cli
from processkit.api.options import run_spec
from processkit.batching.manifest import parse as parse_manifest
from processkit.cli.run import parse as parse_run
from processkit.errors import Failure
from processkit.grammar.run import RUN_OPTIONS
from processkit.spec import U32_MAX
from run_spelling import run_argv
from streams import stderr_lines
from test_import_graph import package_imports, package_of

BY_KEYWORD = {option.keyword: option for option in RUN_OPTIONS}


def cli_message(argv: list[str], *, stdin: bytes = b"") -> str:
    """The one line ``processkit-cli run ARGV`` refuses it with (exit 100), its names kept."""
    proc = subprocess.run(cli_command() + ["run", *argv], input=stdin, capture_output=True, timeout=SAFETY_NET)
    assert proc.returncode == 100, proc.stderr
    (line,) = stderr_lines(proc)
    return line.removeprefix("processkit-cli: ")


def api_message(args: list, **keywords) -> str:
    with pytest.raises(ValueError) as caught:
        processkit.run(args, **keywords)
    return str(caught.value)


def manifest_message(line: dict) -> str:
    with pytest.raises(Failure) as caught:
        parse_manifest([json.dumps(line).encode()])
    assert caught.value.code == 100
    return caught.value.message.removeprefix("manifest line 1: ")


def unnamed(message: str) -> str:
    """``message`` with every option's name, as any of the three describers spells it, taken out."""
    for option in RUN_OPTIONS:
        for name in (option.flag, f"{option.keyword}=", option.keyword):
            message = message.replace(f"'{name}'", "'<option>'")
    return message


# -- values: counts, durations, sizes ----------------------------------------------------------
@pytest.mark.parametrize(
    "keyword, value",
    [
        ("max_processes", "\u00b2"),  # a superscript two: str.isdigit() takes it, int() does not
        ("max_processes", "\u0663"),  # an Arabic-Indic three: int() takes it
        ("max_processes", "1_0"),  # int() takes it
        ("max_processes", " 7"),  # int() takes it
        ("timeout", "1_0s"),
        ("timeout", "\u0663s"),
        ("grace", "1_0"),
        ("max_memory", "\u00b2k"),
        ("max_memory", "1_0m"),
    ],
)
def test_a_bad_value_is_refused_the_same_way_by_run_the_api_and_a_manifest(tmp_path, keyword, value):
    flag = BY_KEYWORD[keyword].flag
    by_run = cli_message(["--jsonl", str(tmp_path / "run.jsonl"), flag, value, "--", "true"])
    by_api = api_message(["true"], **{keyword: value})
    by_manifest = manifest_message({"args": ["true"], keyword: value})
    assert f"'{flag}'" in by_run and f"'{keyword}='" in by_api and f"'{keyword}'" in by_manifest
    assert unnamed(by_run) == unnamed(by_api) == unnamed(by_manifest)
    assert f"invalid value '{value}' for '<option>'" in unnamed(by_run)
    assert not (tmp_path / "run.jsonl").exists()


COUNT = re.compile(r"\+?[0-9]+", re.ASCII)
LOOK_ALIKES = "0123456789+_ -" + "\u00b2\u0663\u06f7\u0967\uff11\U0001d7d9\u2070"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=LOOK_ALIKES, max_size=6))
@example("\u00b2")
@example("\u0663")
@example("1_0")
@example("+7")
def test_one_count_grammar_for_every_describer(text):
    """ASCII digits after an optional "+", nothing else: as the regular expression says, and
    the same answer (the same message) from the flag, the keyword and the key."""
    wanted = int(text) if COUNT.fullmatch(text) and 1 <= int(text) <= U32_MAX else None
    answers = []
    for describe in (
        lambda: parse_run(["--jsonl", "j", "--max-processes=" + text, "--", "true"]),
        lambda: run_spec(["true"], {"max_processes": text}, jsonl="j", function="run", fixed={}),
        lambda: parse_manifest([json.dumps({"args": ["true"], "max_processes": text}).encode()])[0].template,
    ):
        try:
            answers.append(describe().limits.max_processes)
        except (Failure, ValueError) as exc:
            answers.append(unnamed(str(getattr(exc, "message", exc)).removeprefix("manifest line 1: ")))
    assert answers[0] == answers[1] == answers[2]
    if wanted is None:
        assert answers[0].startswith(f"invalid value '{text}' for '<option>': expected a whole number from 1 to")
    else:
        assert answers[0] == wanted


# -- the text rule: argv, env, labels, run ids -------------------------------------------------
@pytest.mark.parametrize(
    "argument, problem",
    [
        ("\udc80", "a lone surrogate ('\\udc80')"),  # JSON's "\udc80": no text, whatever os.fsencode makes of it
        ("\ud800", "a lone surrogate ('\\ud800')"),
        ("a\0b", "a NUL character (at offset 1)"),
    ],
)
def test_an_argument_the_text_rule_refuses_is_refused_by_run_the_api_and_a_manifest(tmp_path, argument, problem):
    """The API's args are subprocess's (``os.fsencode``): an undecoded byte's ``"\\udc80"`` is
    that byte there (tests/test_api_surrogate_args.py), text everywhere else."""
    jsonl = tmp_path / "run.jsonl"
    by_run = cli_message(["--jsonl", str(jsonl)], stdin=json.dumps(["true", argument]).encode())
    by_manifest = manifest_message({"args": ["true", argument]})
    assert f"argument 1 holds {problem}" in by_run
    carried = (
        "no argument, environment or path can carry"
        if "\0" in argument
        else "is no text (an undecoded byte goes as bytes)"
    )
    assert by_manifest == f"args item 1 holds {problem}, which {carried}"
    if argument != "\udc80":  # the API's str args are os.fsencode's: "\ud800" has no bytes, a NUL ends one
        assert (
            api_message(["true", argument])
            == f"args item 1 holds {problem}, which no argument, environment or path can carry"
        )
    assert not jsonl.exists()


def test_bytes_are_the_oss_form_and_keep_an_undecodable_byte():
    """The rule is about text: bytes (the command line's own, the API's) carry any byte but NUL."""
    assert processkit.run(["printf", "%s", b"\x80"], capture_output=True).stdout == b"\x80"
    assert processkit.run(["printf", "%s", os.fsdecode(b"\x80").encode("utf-8", "surrogateescape")]).returncode == 0
    proc = subprocess.run(
        cli_command() + ["run", "--jsonl", os.devnull, "--", "printf", "%s", os.fsdecode(b"\x80")],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=SAFETY_NET,
    )
    assert (proc.returncode, proc.stdout) == (0, b"\x80")


@pytest.mark.parametrize("value", ["\ud800", "a\0b"])
def test_an_env_value_the_text_rule_refuses_is_refused_by_the_api_and_a_manifest(value):
    """The API's env is subprocess's (``"\\udc80"`` is the byte 0x80: tests/test_api_surrogate_env_cwd.py),
    a manifest's text: both refuse what has no bytes, naming the same value."""
    by_api = api_message(["true"], env={"K": value})
    assert by_api.split(", which ")[0] == manifest_message({"args": ["true"], "env": {"K": value}}).split(", which ")[0]
    assert by_api.startswith("the value of 'K' in env holds a ")
    # The API's env= is subprocess's (a mapping, the whole environment); env_add= is the adding form
    # a manifest's list of KEY=VALUE spells: the same refusal, naming its own keyword.
    reason = by_api.split(" holds ", 1)[1]
    listed = manifest_message({"args": ["true"], "env": [f"K={value}"]})
    assert listed.startswith(f"each item of env holds {reason.split(' (')[0]} ("), listed
    assert api_message(["true"], env_add={"K": value}) == by_api.replace("in env ", "in env_add ")


@pytest.mark.parametrize("value", ["\udc80", "\ud800", "a\0b", "\x1b[2J"])
def test_a_label_or_run_id_its_grammar_refuses_is_refused_the_same_way_everywhere(tmp_path, value):
    """Labels and run ids are shown on terminals: their own grammar refuses a surrogate, a NUL or
    an escape, with the same words from the flag (its bytes, where the OS can carry them), the
    keyword and the key."""
    label = api_message(["true"], labels={"k": value})
    assert (
        label
        == manifest_message({"args": ["true"], "labels": {"k": value}})
        == api_message(["true"], labels=[f"k={value}"])
    )
    assert label.startswith("invalid label value for key 'k'")
    run_id = api_message(["true"], run_id=value)
    assert unnamed(run_id) == unnamed(manifest_message({"args": ["true"], "run_id": value}))
    if "\0" not in value and value != "\ud800":  # what a command line can carry
        argv = ["--jsonl", str(tmp_path / "run.jsonl"), "--label", f"k={value}", "--", "true"]
        assert cli_message(argv) == label
        argv = ["--jsonl", str(tmp_path / "run.jsonl"), "--run-id", value, "--", "true"]
        assert unnamed(cli_message(argv)) == unnamed(run_id)


# -- the API's words: keywords, never flags ------------------------------------------------------
@pytest.mark.parametrize(
    "keywords, message",
    [
        ({"capture_keep": "tail"}, "the argument 'capture_keep=' requires 'capture_dir='"),
        ({"capture_overflow": "cancel"}, "the argument 'capture_overflow=' requires 'capture_dir='"),
        ({"pty_size": "80x24"}, "the argument 'pty_size=' requires 'pty='"),
        (
            {"inherit_stdio": True, "idle_timeout": 5},
            "the argument 'inherit_stdio=' cannot be used with 'idle_timeout='",
        ),
        ({"inherit_stdin": True, "stdin_file": "f"}, "the argument 'inherit_stdin=' cannot be used with 'stdin_file='"),
        ({"timeout": "1y"}, "invalid value '1y' for 'timeout=': expected a whole number with an optional unit"),
        ({"timeout": 0}, "invalid value 0 for 'timeout=': duration must be greater than zero"),
        ({"grace": -1}, "invalid value -1 for 'grace=': expected a finite number of seconds, not negative"),
        ({"grace": float("nan")}, "invalid value nan for 'grace=': expected a finite number of seconds, not nan"),
        (
            {"timeout": 0.0005},  # round(0.5) is 0; 0.0006 is 1ms
            "invalid value 0.0005 for 'timeout=': duration rounds to 0ms (a duration is counted in whole milliseconds)",
        ),
        ({"max_memory": 0}, "invalid value 0 for 'max_memory=': size must be greater than zero"),
        ({"max_processes": 2**40}, f"invalid value {2**40} for 'max_processes=': expected a whole number from 1 to"),
        ({"max_processes": 2**80}, "invalid value (an int of 81 bits) for 'max_processes='"),
        ({"cpu_quota": float("nan")}, "invalid value nan for 'cpu_quota=': expected a finite number of cores"),
        (
            {"capture_keep": "middle", "capture_dir": "d"},
            "invalid value 'middle' for 'capture_keep=': expected head, tail",
        ),
        ({"env_remove": ["A B"]}, "invalid value for 'env_remove=': an environment key may not contain whitespace"),
        ({"run_id_env": "K", "env": {"K": "v"}}, "'run_id_env=K' conflicts with 'env=K=...'"),
    ],
)
def test_an_api_error_names_the_keyword_not_the_flag(keywords, message):
    got = api_message(["true"], **keywords)
    assert got.startswith(message)
    assert "--" not in got


def test_a_manifests_seconds_rounded_to_zero_say_so(tmp_path):
    """A number of seconds is the API's and a manifest's own form (the flags' grammar takes no
    fraction), counted in whole milliseconds: ``0.0004`` said ``duration must be greater than
    zero`` of a value above zero."""
    (tmp_path / "jobs.jsonl").write_text('{"args": ["true"], "timeout": 0.0004}\n')
    refused = run_cli("batch", "jobs.jsonl", "--out", tmp_path / "out", cwd=tmp_path)
    assert refused.returncode == 100, refused.stderr
    assert refused.stderr.decode() == (
        "processkit-cli: manifest line 1: invalid value 0.0004 for 'timeout': "
        "duration rounds to 0ms (a duration is counted in whole milliseconds)\n"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("call", [processkit.run, processkit.start])
def test_an_unknown_keyword_is_a_type_error_naming_it(call):
    hint = r" \(did you mean 'capture_keep'\?\)"  # the keyword meant, as a manifest's typo says it
    with pytest.raises(TypeError, match=rf"^\w+\(\) got an unexpected keyword argument 'capture_kep'{hint}$"):
        call(["true"], capture_kep="tail")


# -- the API's spec is the CLI's ------------------------------------------------------------------
TEXT = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=6)
KEYWORDS = st.fixed_dictionaries(
    {},
    optional={
        "timeout": st.one_of(st.integers(0, 10**6), st.floats(0, 10**4), st.sampled_from(["250ms", "3s", "0", "1_0"])),
        "idle_timeout": st.one_of(st.integers(0, 10), TEXT),
        "grace": st.one_of(st.integers(0, 100), st.just(0.5), st.just("\u0663")),
        "max_memory": st.one_of(st.integers(0, 1 << 40), st.sampled_from(["64m", "1g", "\u00b2k", "0"])),
        "max_processes": st.one_of(st.integers(0, 2**33), TEXT),
        "cpu_quota": st.one_of(st.sampled_from([0.5, 1, 2.25, 0]), TEXT),
        "cwd": TEXT,
        "capture_dir": TEXT,
        "capture_max_bytes": st.one_of(st.sampled_from([0, 1024, "8m", "-1"]), TEXT),
        "capture_overflow": st.sampled_from(["truncate", "cancel"]),
        "capture_keep": st.sampled_from(["head", "tail", "head-tail"]),
        "inherit_stdio": st.booleans(),
        "inherit_stdin": st.booleans(),
        "stdin_file": TEXT,
        "pty": st.booleans(),
        "pty_size": st.sampled_from(["80x24", "0x1", "x"]),
        "argv_raw": st.booleans(),
        "env_clear": st.booleans(),
        "env_remove": st.lists(TEXT, max_size=2),
        "env": st.dictionaries(TEXT.filter(lambda t: "=" not in t), TEXT, max_size=2),
        "labels": st.dictionaries(TEXT.filter(lambda t: "=" not in t), TEXT, max_size=2),
        "run_id_env": TEXT,
        "run_id": TEXT,
        "snapshot_interval": st.sampled_from(["2s", 1, 0]),
    },
)


def _answer(describe, keywords: dict):
    try:
        spec = describe()
    except (Failure, ValueError) as exc:
        message = unnamed(str(getattr(exc, "message", exc)))
        return message if all(isinstance(value, str) for value in keywords.values()) else "refused"
    if not spec.run_id_given:
        spec = spec.replace(run_id="fresh")
    return spec


@settings(max_examples=400, deadline=None)
@given(KEYWORDS)
def test_the_apis_spec_is_what_run_parses_from_the_flags_the_keywords_spell(keywords):
    """Built from typed values, never from a command line, and still the same RunSpec (or the
    same refusal, word for word where every value is text) as ``run`` with the flags."""
    by_api = _answer(lambda: run_spec(["true"], keywords, jsonl="j", function="run", fixed={}), keywords)
    by_run = _answer(lambda: parse_run(run_argv(keywords, jsonl="j") + ["--", "true"]), keywords)
    assert by_api == by_run


# -- the layering ----------------------------------------------------------------------------
SHARED = {"processkit", "spec", "errors", "text", "plain"}


def test_the_grammar_is_stdlib_only_and_below_every_describer_of_a_run():
    graph = package_imports()
    for module, targets in graph.items():
        if package_of(module) == "grammar":
            assert {package_of(target) for target in targets} <= SHARED | {"grammar"}, module
    from pathlib import Path

    import ast

    for path in Path(processkit.__file__).parent.joinpath("grammar").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                assert all(alias.name.split(".")[0] in sys.stdlib_module_names for alias in node.names), path
            elif isinstance(node, ast.ImportFrom) and not node.level:
                assert (node.module or "").split(".")[0] in sys.stdlib_module_names | {"__future__"}, path


def reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_neither_the_api_nor_the_manifest_reaches_the_cli():
    """What made ``cli -> batching -> api -> cli`` (the ``COMMANDS`` table names batch's module as
    a string): the API and the manifest read keywords through ``grammar``, not ``cli.run``."""
    graph = package_imports()
    for start in ["processkit.batching.manifest", *(m for m in graph if package_of(m) == "api")]:
        reached = {package_of(module) for module in reaches(graph, start)}
        assert "cli" not in reached, start
    assert not {m for m in reaches(graph, "processkit.batching.manifest") if package_of(m) == "api"}


@pytest.mark.parametrize(
    ("engine_words", "api_words"),
    [
        (
            "cannot open a pseudo-terminal for --pty: no devices",
            "cannot open a pseudo-terminal for pty=True: no devices",
        ),
        ("--pty and --no-echo together", "pty=True and no_echo=True together"),
        ("--timeout 5s is over", "timeout=5s is over"),
    ],
)
def test_the_api_names_run_flags_in_a_message_by_keyword_a_switch_taking_no_value(engine_words, api_words):
    """A switch (``--pty``) takes no value: the word after it in the engine's message is the
    message's own, never joined to it as ``pty=and``; a value flag's value still is."""
    from processkit.grammar import KEYWORDS
    from processkit.grammar.keywords import reworded

    assert reworded(engine_words, KEYWORDS) == api_words


def test_a_command_typed_without_the_separator_is_told_where_it_goes(tmp_path):
    """``run --jsonl F echo hi`` got argparse's bare "unrecognized arguments"; the words now say
    the command goes after ``--`` (a mistyped flag keeps argparse's words). Nothing runs."""
    done = run_cli_here(tmp_path, "run", "--jsonl", "r.jsonl", "echo", "hi")
    assert done.returncode == 100
    assert done.stderr.splitlines()[0] == (
        "processkit-cli: unrecognized arguments: echo hi "
        "(the command goes after --: processkit-cli run --jsonl FILE -- echo hi)"
    )
    assert not (tmp_path / "r.jsonl").exists()
    done = run_cli_here(tmp_path, "run", "--jsonl", "r.jsonl", "sh", "-c", "echo a b")
    assert done.stderr.splitlines()[0].endswith("-- sh -c 'echo a b')"), done.stderr  # quoted as the shell took it
    done = run_cli_here(tmp_path, "run", "--jsonl", "r.jsonl", "--bogus")
    assert done.stderr.splitlines()[0] == "processkit-cli: unrecognized arguments: --bogus"


def run_cli_here(cwd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*cli_command(), *args], cwd=cwd, capture_output=True, text=True, timeout=SAFETY_NET)
