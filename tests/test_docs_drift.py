"""Drift: every fact the README, docs/ and the agent skill state about the CLI's surface is held
to what the installed binary reports about itself: ``probe --json`` (subcommands, flags,
schema version, exit band), ``--help`` (the exit-code table, the options a parser prints).
No list of flags or codes is kept here; the prose is read, the binary is asked.

What counts as a stated fact:
- a command line in code (``processkit-cli SUB ... --flag``): SUB is a subcommand, every flag
  before a bare ``--`` is one SUB takes, every ``--require-surface TOKEN`` names a real token;
- a backticked flag in prose (`` `--no-echo` ``, `` `wait --timeout` ``): some subcommand (the
  one named, if any) takes it (another program's flag goes with its name: `` `sbatch --signal` ``);
- a value given to a fixed-value flag in either (``--capture-overflow cancel``): one of the
  values the parser prints for it;
- an exit code written ``exit NNN``, ``(NNN)``, in a table row ``| NNN | meaning |`` or a list
  ``(NNN meaning, NNN meaning, ...)``: a code the binary has (or, in a row ``| NNN | — |``, one
  it does not have), every kind a row names in backticks one of the code's, a listed meaning's
  first word one of its kinds;
- a band ``band ... NNN-NNN``, a ``schema_version`` number: the binary's;
- a Python API call in a python block: the function exists and takes those keywords, and
  the attributes read from what it returns exist.

A section that starts with ``<!-- extension: TOKEN -->`` (a surface token, or
``python:module.attr``) describes a feature another branch is adding: its facts are checked as
soon as the binary reports TOKEN; a section whose TOKEN this build lacks is itself drift (it
describes something that is not there), so it fails.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import run_cli
from control_support import json_out

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted(ROOT.glob("docs/*.md")), *sorted(ROOT.glob("skills/*/SKILL.md"))]
SKILL = ROOT / "skills" / "using-processkit-cli" / "SKILL.md"

FENCE = re.compile(r"^```(\w*)\s*$")
HEADING = re.compile(r"^#{1,6} ")
MARKER = re.compile(r"<!--\s*extension:\s*(\S+)\s*-->")
INLINE = re.compile(r"`([^`\n]+)`")
INVOCATION = re.compile(r"(?<![\w-])processkit-cli[ \t]+(.*)")
SHELL_STOPS = {"--", "|", "||", "&&", ";", ">", "<", "2>&1"}
FLAG = re.compile(r"--?[A-Za-z][\w-]*\*?")
BAND = re.compile(r"\bband\b[^0-9|]{0,20}(1\d\d)\s*(?:-|–|—)\s*(1\d\d)\b")
SCHEMA_VERSION = re.compile(r"schema[_-]version[`'\"]?\s*[:=]?\s*(?:is\s+)?`?(\d+)")
CODE_MENTION = re.compile(r"\bexit(?:s|ed)?(?: code| status| with)? `?(1\d\d)\b|\((1\d\d)\)")
TABLE_ROW = re.compile(r"^\|\s*`?(1\d\d)`?\s*\|\s*([^|]+)\|", re.M)
UNUSED = {"—", "-", "–", "`—`"}  # a table row that gives a code no kind says it is not used
LIST = re.compile(r"\(((?:1\d\d [a-z][a-z ]*, )+1\d\d [a-z][a-z ]*)\)")
LIST_ITEM = re.compile(r"(1\d\d) ([a-z][a-z ]*)")


@dataclass
class Section:
    """A stretch of one document between headings; ``requires`` is its extension marker."""

    doc: str
    requires: str | None
    prose: list[str]
    fences: list[tuple[str, str]]  # (language, text with line continuations joined)

    def spans(self) -> list[str]:
        return [span for line in self.prose for span in INLINE.findall(line)]

    def prose_text(self) -> str:
        """The prose with inline code unwrapped, whitespace collapsed (facts wrap lines)."""
        return " ".join(" ".join(self.prose).split())

    def code_lines(self) -> list[str]:
        return [line for _, text in self.fences for line in text.splitlines()] + self.spans()


def sections(path: Path) -> list[Section]:
    name = str(path.relative_to(ROOT))
    found = [Section(name, None, [], [])]
    fence_language, fence_lines = None, []
    for line in path.read_text(encoding="utf-8").splitlines():
        if fence_language is not None:
            if FENCE.match(line):
                found[-1].fences.append((fence_language, "\n".join(fence_lines).replace("\\\n", " ")))
                fence_language, fence_lines = None, []
            else:
                fence_lines.append(line)
            continue
        if (opening := FENCE.match(line)) is not None:
            fence_language = opening[1]
        elif HEADING.match(line):
            found.append(Section(name, None, [], []))
        elif (marker := MARKER.search(line)) is not None:
            found[-1].requires = marker[1]
        else:
            found[-1].prose.append(line)
    return found


class Binary:
    """What the installed processkit-cli says about itself."""

    def __init__(self):
        report = json_out(run_cli("probe", "--json"))
        self.schema_version = report["schema_version"]
        self.band = (report["exit_code_band"]["start"], report["exit_code_band"]["end"])
        self.surface = set(report["surface"])
        self.commands = {token for token in self.surface if ":" not in token}
        self.help = run_cli("--help").stdout.decode()
        self.exit_codes = {
            int(code): [label.strip() for label in labels.split(",")]
            for code, labels in re.findall(r"^  (1\d\d)  (.+)$", self.help, re.M)
        }
        self.kinds = {label for labels in self.exit_codes.values() for label in labels}
        self.helps: dict[str, str] = {}

    def help_of(self, command: str | None) -> str:
        if command is None:
            return self.help
        if command not in self.helps:
            self.helps[command] = run_cli(command, "--help").stdout.decode()
        return self.helps[command]

    def printed_options(self, command: str | None) -> frozenset[str]:
        """The options a parser prints in its --help (``-h``, short forms, globals)."""
        return frozenset(FLAG.findall(self.help_of(command)))

    def choices(self, command: str) -> dict[str, frozenset[str]]:
        """A fixed-value flag's values, as the parser prints them: ``--flag {a,b}``."""
        found = re.findall(r"(--[\w-]+) \{([^}]+)\}", self.help_of(command))
        return {flag: frozenset(values.split(",")) for flag, values in found}

    def values_for(self, command: str | None, flag: str) -> frozenset[str] | None:
        """The values ``flag`` accepts (under ``command``, else under any subcommand), if fixed."""
        sets = [
            self.choices(name)[flag]
            for name in ([command] if command else sorted(self.commands))
            if flag in self.choices(name)
        ]
        return frozenset().union(*sets) if sets else None

    def takes(self, command: str, flag: str) -> bool:
        flags = {token.partition(":")[2] for token in self.surface if token.startswith(f"{command}:")}
        flags |= self.printed_options(command) | self.printed_options(None)
        return _matches(flag, flags)

    def any_takes(self, flag: str) -> bool:
        return any(self.takes(command, flag) for command in self.commands)

    def met(self, requirement: str | None) -> bool:
        if requirement is None:
            return True
        if requirement.startswith("python:"):
            module, _, attribute = requirement.removeprefix("python:").rpartition(".")
            try:
                return hasattr(importlib.import_module(module), attribute)
            except ImportError:
                return False
        return requirement in self.surface

    def meaning_matches(self, code: int, meaning: str) -> bool:
        """The meaning's first word names one of the code's kinds (``containment`` for
        ``container_error``, ``cancelled by a signal`` for ``cancelled``)."""
        word = re.sub(r"[^a-z_]", "", meaning.split()[0].lower()) if meaning.split() else ""
        parts = {part for label in self.exit_codes.get(code, []) for part in [label, *label.split("_")]}
        return any(word == part or (len(part) >= 5 and _common_prefix(word, part) >= 5) for part in parts)


def _matches(flag: str, flags: set[str]) -> bool:
    """``--require-*`` in prose stands for the family of flags it names."""
    if flag.endswith("*"):
        return any(known.startswith(flag[:-1]) for known in flags)
    return flag in flags


def _common_prefix(a: str, b: str) -> int:
    length = 0
    while length < min(len(a), len(b)) and a[length] == b[length]:
        length += 1
    return length


@pytest.fixture(scope="module")
def binary() -> Binary:
    return Binary()


@pytest.fixture(scope="module")
def checked(binary) -> list[Section]:
    """The sections whose facts apply to this build (extension sections once they land)."""
    return [section for doc in DOCS for section in sections(doc) if binary.met(section.requires)]


# -- the checks: each returns the violations, so a test can also show they catch drift ----------
def invocation_violations(section: Section, binary: Binary) -> list[str]:
    found = []
    for line in section.code_lines():
        for match in INVOCATION.finditer(line):
            tokens = [token.strip("[]()") for token in match[1].split()]
            while tokens and tokens[0].startswith("--error-format"):
                tokens = tokens[1:] if "=" in tokens[0] else tokens[2:]
            if not tokens or not re.fullmatch(r"[a-z][a-z-]*", tokens[0]):
                continue
            command, previous = tokens[0], None
            if command not in binary.commands:
                found.append(f"{section.doc}: `processkit-cli {command}`: no such subcommand")
                continue
            for token in tokens[1:]:
                if token in SHELL_STOPS or token.startswith("#"):
                    break
                if previous == "--require-surface" and token not in binary.surface:
                    found.append(f"{section.doc}: --require-surface {token}: not in probe's surface")
                flag = token.partition("=")[0]
                if FLAG.fullmatch(flag) and not binary.takes(command, flag):
                    found.append(
                        f"{section.doc}: `processkit-cli {command} ... {flag}`: {command} does not take {flag}"
                    )
                found += value_violations(section, binary, command, previous, token)
                previous = token
    return found


def value_violations(
    section: Section, binary: Binary, command: str | None, previous: str | None, token: str
) -> list[str]:
    """A value given to a fixed-value flag (``--flag value`` or ``--flag=value``) is one it takes."""
    flag, equals, value = token.partition("=")
    if not equals:
        flag, value = previous, token
    if flag is None or not flag.startswith("--") or value.startswith("-"):
        return []
    allowed = binary.values_for(command, flag)
    if allowed is None or set(re.split(r"\\?\|", value)) <= allowed:  # truncate\|cancel in a table
        return []
    return [f"{section.doc}: {flag} {value}: the binary takes {sorted(allowed)}"]


def backticked_flag_violations(section: Section, binary: Binary) -> list[str]:
    found = []
    for span in section.spans():
        tokens = span.split()
        if not tokens or "processkit-cli" in span:
            continue
        command = tokens[0] if tokens[0] in binary.commands and len(tokens) > 1 else None
        if command is None and not tokens[0].startswith("--"):
            continue
        previous = None
        for token in tokens[1:] if command else tokens:
            if token in SHELL_STOPS:
                break
            found += value_violations(section, binary, command, previous, token.strip("[](),."))
            previous = token.strip("[](),.")
            flag = token.strip("[](),.").partition("=")[0]
            if not FLAG.fullmatch(flag) or not flag.startswith("--"):
                continue
            if not (binary.takes(command, flag) if command else binary.any_takes(flag)):
                found.append(f"{section.doc}: `{span}`: {command or 'no subcommand'} takes no {flag}")
    return found


def exit_code_violations(section: Section, binary: Binary) -> list[str]:
    found = []
    text = section.prose_text().replace("`", "")
    rows = [(int(code), meaning.strip()) for code, meaning in TABLE_ROW.findall("\n".join(section.prose))]
    listed = [(int(code), meaning) for group in LIST.findall(text) for code, meaning in LIST_ITEM.findall(group)]
    unused = {code for code, meaning in rows if meaning in UNUSED}
    band = range(binary.band[0], binary.band[1] + 1)
    mentioned = [int(a or b) for a, b in CODE_MENTION.findall(text)] + [code for code, _ in rows + listed]
    for code in mentioned:
        if code in unused and code in binary.exit_codes:
            found.append(
                f"{section.doc}: exit code {code} is said to be unused: the binary has it as {binary.exit_codes[code]}"
            )
        elif code in band and code not in unused and code not in binary.exit_codes:
            found.append(f"{section.doc}: exit code {code}: the binary has no such code")
    # A table row's kinds in backticks must all be the code's; a listed code's first word names one.
    for code, meaning in rows:
        named = set(re.findall(r"`([a-z_]+)`", meaning)) & binary.kinds
        if code in binary.exit_codes and not named <= set(binary.exit_codes[code]):
            found.append(f"{section.doc}: {code} '{meaning}': the binary's {code} is {binary.exit_codes[code]}")
    for code, meaning in listed:
        if code in binary.exit_codes and not binary.meaning_matches(code, meaning):
            found.append(f"{section.doc}: {code} '{meaning}': the binary's {code} is {binary.exit_codes[code]}")
    return found


def number_violations(section: Section, binary: Binary) -> list[str]:
    found = []
    text = " ".join([section.prose_text()] + section.code_lines())
    for start, end in BAND.findall(text):
        if (int(start), int(end)) != binary.band:
            found.append(f"{section.doc}: band {start}-{end}: the binary reserves {binary.band[0]}-{binary.band[1]}")
    for version in SCHEMA_VERSION.findall(text):
        if int(version) != binary.schema_version:
            found.append(f"{section.doc}: schema_version {version}: the binary emits {binary.schema_version}")
    return found


def python_api_violations(section: Section) -> list[str]:
    found = []
    for language, code in section.fences:
        if language == "python":
            found += [f"{section.doc}: {violation}" for violation in _python_violations(ast.parse(code))]
    return found


def _python_violations(tree: ast.Module) -> list[str]:
    """Calls ``module.function(keyword=...)`` on an imported module, and attributes read from
    what such a call returned (``result = module.run(...); result.returncode``)."""
    modules = {
        alias.asname or alias.name: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    found, returned = [], {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            returned[node.targets[0].id] = node.value
    results = {}
    for node in ast.walk(tree):
        call = node if isinstance(node, ast.Call) else None
        if call is None or not isinstance(call.func, ast.Attribute) or not isinstance(call.func.value, ast.Name):
            continue
        if call.func.value.id not in modules:
            continue
        module = importlib.import_module(modules[call.func.value.id])
        name = f"{module.__name__}.{call.func.attr}"
        function = getattr(module, call.func.attr, None)
        if function is None:
            found.append(f"{name}: no such function")
            continue
        parameters = inspect.signature(function).parameters
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            found += [f"{name}({k.arg}=...): no such keyword" for k in call.keywords if k.arg not in parameters]
        results[id(call)] = (name, _returned_class(function))
    for variable, call in returned.items():
        name, cls = results.get(id(call), (None, None))
        if cls is None:
            continue
        known = set(dir(cls)) | set(getattr(cls, "__annotations__", {}))
        read = {
            n.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == variable
        }
        found += [
            f"{name}(...).{attribute}: {cls.__name__} has no such attribute" for attribute in sorted(read - known)
        ]
    return found


def _returned_class(function) -> type | None:
    """The class a call returns: the class itself, or the function's return annotation."""
    if inspect.isclass(function):
        return function
    try:
        hint = typing.get_type_hints(function).get("return")
    except Exception:  # noqa: BLE001 - an annotation that cannot be resolved checks nothing
        return None
    return hint if inspect.isclass(hint) else None


# -- the tests ------------------------------------------------------------------------------------
def test_every_command_line_uses_real_subcommands_and_flags(binary, checked):
    violations = [v for section in checked for v in invocation_violations(section, binary)]
    assert not violations, "\n".join(violations)


def test_every_backticked_flag_is_one_the_binary_takes(binary, checked):
    violations = [v for section in checked for v in backticked_flag_violations(section, binary)]
    assert not violations, "\n".join(violations)


def test_every_exit_code_and_its_meaning_is_the_binarys(binary, checked):
    assert binary.exit_codes, binary.help
    violations = [v for section in checked for v in exit_code_violations(section, binary)]
    assert not violations, "\n".join(violations)


def test_the_band_and_schema_version_are_the_binarys(binary, checked):
    violations = [v for section in checked for v in number_violations(section, binary)]
    assert not violations, "\n".join(violations)


def test_python_api_calls_match_the_library(checked):
    violations = [v for section in checked for v in python_api_violations(section)]
    assert not violations, "\n".join(violations)


def test_the_skill_tables_every_exit_code_the_binary_has(binary):
    tabled = {int(code) for section in sections(SKILL) for code, _ in TABLE_ROW.findall("\n".join(section.prose))}
    assert tabled == set(binary.exit_codes)


def test_the_skill_names_itself_and_says_when_to_use_it():
    text = SKILL.read_text(encoding="utf-8")
    front = re.match(r"---\nname: (\S+)\ndescription: (.+?)\n---\n", text, re.S)
    assert front and front[1] == SKILL.parent.name and len(front[2]) > 40


def test_the_checks_catch_drift(binary):
    """A made-up flag, subcommand, code, meaning, band and schema version are each caught."""
    drifted = Section(
        "made-up.md",
        None,
        [
            "Use `--no-such-flag` or `wait --json`; a bad run exits 105, and (106 usage, 100 usage).",
            "Say `--capture-overflow drop` or `list --health=jail`.",
            "The band is 100-120, and `schema_version` is 7.",
            "| 113 | `timeout` | wrong |",
            "| 103 | `stale`, `timeout` | one of two is wrong |",
            "| 104 | — | unused, says this row |",
        ],
        [
            (
                "sh",
                "processkit-cli frobnicate --x\nprocesskit-cli run --bogus -- true --not-checked\n"
                "processkit-cli probe --json --require-surface run:--bogus\n"
                "processkit-cli run --capture-overflow discard --jsonl x -- true",
            )
        ],
    )
    assert len(invocation_violations(drifted, binary)) == 4
    assert len(backticked_flag_violations(drifted, binary)) == 4
    assert len(exit_code_violations(drifted, binary)) == 5
    assert len(number_violations(drifted, binary)) == 2


def test_the_python_check_catches_drift():
    code = "import shlex\nimport test_docs_drift\nshlex.split('a', bogus=True)\nshlex.nothing()\n"
    code += "found = test_docs_drift.Section('x', None, [], [])\nprint(found.doc, found.no_such_field)\n"
    assert _python_violations(ast.parse(code)) == [
        "shlex.split(bogus=...): no such keyword",
        "shlex.nothing: no such function",
        "test_docs_drift.Section(...).no_such_field: Section has no such attribute",
    ]


def pending(found: list[Section], binary: Binary) -> list[str]:
    """The sections that describe a feature this build does not report."""
    return sorted({f"{section.doc}: {section.requires}" for section in found if not binary.met(section.requires)})


def test_no_section_describes_a_feature_this_build_lacks(binary):
    """An extension section is checked once its feature lands; one whose feature is not in the
    build that ships it tells the reader of something that is not there."""
    assert pending([section for doc in DOCS for section in sections(doc)], binary) == []


def test_a_section_awaiting_a_missing_feature_is_found(binary):
    awaiting = Section("an-awaiting-section", "no-such-surface-token", [], [])
    landed = Section("a-landed-section", None, [], [])
    assert pending([awaiting, landed], binary) == ["an-awaiting-section: no-such-surface-token"]
