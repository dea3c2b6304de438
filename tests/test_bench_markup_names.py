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
    assert org_row.startswith(f"| ={shown}=  |"), org_row  # k=1 cannot end org's verbatim: written raw


def test_org_escapes_only_an_equals_sign_that_would_end_the_verbatim(tmp_path):
    """Org ends ``=...=`` at an ``=`` with non-space before it and a space, ``-.,:!?;'")}\\[``
    or the end after it: only there a zero-width space goes; ``FOO=1`` and ``(k = a)`` stay
    byte for byte as hyperfine writes them (a command copied from the row still runs)."""
    out = tmp_path / "t.org"
    done = run_cli(
        "bench", "-N", "--runs=1", "--style=none", "-L", "k", "a", "--export-orgmode", out,
        "env FOO=1 true", "echo a= b x=, y=)", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = out.read_text().splitlines()[2:]
    assert rows[0].startswith("| =env FOO=1 true (k = a)=  |"), rows[0]
    assert rows[1].startswith("| =echo a=\u200b b x=\u200b, y=\u200b) (k = a)=  |"), rows[1]


def test_org_names_a_command_with_a_bar_or_edge_spaces_in_verbatim_org_can_show(tmp_path):
    """A ``|`` (org's ``\\vert{}``) was written inside the verbatim, where org shows the escape
    as it is, and a name with a space at its end (`` quick ``) left a verbatim org never ends.
    The verbatim ends before each bar and begins again after it where org lets it (after a
    space); the spaces at a name's ends stand outside it."""
    out = tmp_path / "t.org"
    done = run_cli(
        "bench", "--runs=1", "--style=none", "--export-orgmode", out,
        "-n", " quick ", "true", "echo a | cat", "echo 'a|b' x", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    names = [row.split("  |  ")[0] for row in out.read_text().splitlines()[2:]]
    assert names == ["|  =quick= ", "| =echo a= \\vert{} =cat=", "| =echo 'a=\\vert{}b' x"], names
