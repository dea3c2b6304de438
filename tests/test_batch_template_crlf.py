"""A template's argument source saved with Windows line ends (CR LF): each argument keeps its
carriage return, as GNU parallel's do, and GNU parallel warns of it (``The first three values
end in CR-NL``); the batch said nothing, so ``gcc a.c\\r`` failed with a name no terminal shows
whole. Now one warning names the source whose first line ends in CR LF; the arguments stay as
parallel gives them."""

from __future__ import annotations

import json

from conftest import run_cli

SAID = "ends its first line in CR LF (a Windows text file): each argument keeps its carriage return"


def _warnings(result) -> list[str]:
    return [line for line in result.stderr.decode().splitlines() if "warning:" in line]


def test_a_crlf_source_is_warned_of_once_and_its_arguments_kept(tmp_path):
    (tmp_path / "win.txt").write_bytes(b"a.c\r\nb.c\r\n")
    dry = run_cli("batch", "--dry-run", "--", "cc", "-c", "{}", "::::", "win.txt", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert [json.loads(line)["args"][2] for line in dry.stdout.decode().splitlines()] == ["a.c\r", "b.c\r"]
    assert _warnings(dry) == [
        f"processkit-cli: warning: the argument source win.txt {SAID} (\\r); strip them first (tr -d '\\r' < FILE)"
    ]
    ran = run_cli("batch", "--out", "out", "--", "printf", "<%s>", input=b"x\r\n", stdin=None, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr  # stdin read as its lines come
    assert [SAID in line for line in _warnings(ran)] == [True]
    assert [p.read_bytes() for p in (tmp_path / "out").glob("*/capture/stdout.log")] == [b"<x\r>"]


def test_a_source_whose_first_line_ends_in_lf_is_not_warned_of(tmp_path):
    (tmp_path / "unix.txt").write_bytes(b"a\nb\r\n")  # a carriage return later on is an argument's own
    dry = run_cli("batch", "--dry-run", "--", "echo", "::::", "unix.txt", ":::", "p\r", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert _warnings(dry) == []
