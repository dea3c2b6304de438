"""The markup exports name each command by the text that ran (hyperfine's tables hold it
verbatim): a backtick or an ``=`` in it (a command substitution, a parameter shown as
``(k = a)``) is escaped in the format's own way, never replaced by another character."""

from __future__ import annotations

from conftest import run_cli

COMMAND = "echo `true` k=1,x"


def test_markup_exports_hold_the_command_text_that_ran(tmp_path):
    done = run_cli(
        "bench",
        "--runs=1",
        "--style=none",
        "-L",
        "k",
        "a",
        "--export-markdown",
        tmp_path / "t.md",
        "--export-asciidoc",
        tmp_path / "t.adoc",
        "--export-orgmode",
        tmp_path / "t.org",
        COMMAND,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    shown = f"{COMMAND} (k = a)"  # the unused parameter beside the command, as hyperfine shows it
    markdown = (tmp_path / "t.md").read_text().splitlines()[2]
    assert markdown.startswith(f"| ``{shown}`` |"), markdown  # a fence longer than the text's backticks
    asciidoc = (tmp_path / "t.adoc").read_text()
    assert f"| `{shown.replace('`', '{backtick}')}` \n" in asciidoc, asciidoc
    org_row = (tmp_path / "t.org").read_text().splitlines()[2]
    assert org_row.replace("\u200b", "").startswith(f"| ={shown}=  |"), org_row  # invisible, so shown as ran
    assert "=\u200b" in org_row  # an inner = cannot close the verbatim early
