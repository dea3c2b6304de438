"""``report STREAM --capture-dir DIR`` reads the capture from DIR, a directory the user names (a
CI artifact downloaded elsewhere, or the wrong build's). Given another run's capture there, the
page said `the file's SHA-256 differs from the one the run recorded: it changed after the run`
beside the stream's own recorded path: a claim that this run's file was changed, about a file it
never wrote, and never which file was read. It now names the file read and says both causes."""

from __future__ import annotations

import html

from conftest import run_cli


def _run(tmp_path, name: str, text: str) -> None:
    ran = run_cli(
        "run", "--jsonl", tmp_path / f"{name}.jsonl", "--capture-dir", tmp_path / name, "--", "sh", "-c", text,
        cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr


def test_another_runs_capture_in_the_directory_given_is_not_said_to_be_this_ones_changed(tmp_path):
    _run(tmp_path, "a", "echo from-run-a")
    _run(tmp_path, "b", "echo from-run-b")
    out = tmp_path / "a.html"
    result = run_cli("report", "a.jsonl", "--capture-dir", "b", "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = html.unescape(out.read_text(encoding="utf-8"))
    assert "from-run-b" in page  # the file read is b's
    assert "it changed after the run" not in page.replace("or it changed after the run", ""), page
    said = "the SHA-256 of b/stdout.log, the file read, differs from the one the run recorded: "
    assert said + "it is another capture than this run's, or it changed after the run" in page, page


def test_the_runs_own_capture_in_the_directory_given_still_matches(tmp_path):
    _run(tmp_path, "a", "echo from-run-a")
    out = tmp_path / "a.html"
    result = run_cli("report", "a.jsonl", "--capture-dir", "a", "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = html.unescape(out.read_text(encoding="utf-8"))
    assert "the file's SHA-256 matches the one the run recorded" in page and "differs" not in page, page


def test_a_capture_missing_from_the_directory_given_names_the_file_read(tmp_path):
    """The note said `the capture file cannot be read` under the run's own recorded path (which
    exists): never which file was looked for. Then it named that file twice, and called it read:
    `empty/stdout.log, the file read, cannot be read: empty/stdout.log does not exist`."""
    _run(tmp_path, "a", "echo from-run-a")
    (tmp_path / "empty").mkdir()
    out = tmp_path / "a.html"
    result = run_cli("report", "a.jsonl", "--capture-dir", "empty", "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = html.unescape(out.read_text(encoding="utf-8"))
    for name in ("stdout.log", "stderr.log"):
        said = f"the capture file from the directory given cannot be read: empty/{name} does not exist"
        assert said in page and page.count(f"empty/{name}") == 1, page
    assert "the capture file cannot be read" not in page, page


def test_a_reason_that_does_not_name_the_file_follows_its_name():
    """An error of the read itself (EIO, a permission) says no name: the file is named before it."""
    from processkit.report.tail import _unreadable

    assert _unreadable("empty/stdout.log", "Input/output error") == (
        "empty/stdout.log, from the directory given, cannot be read: Input/output error"
    )
    assert _unreadable(None, "Input/output error") == "the capture file cannot be read: Input/output error"


def test_a_reason_naming_a_longer_path_with_the_same_end_still_names_the_file():
    """The file's path is looked for as a whole word in the reason, not as any part of it."""
    from processkit.report.tail import _unreadable

    assert _unreadable("a/stdout.log", "xa/stdout.log does not exist") == (
        "a/stdout.log, from the directory given, cannot be read: xa/stdout.log does not exist"
    )
    assert (
        _unreadable("a/stdout.log", "a/stdout.log: no")
        == "the capture file from the directory given cannot be read: a/stdout.log: no"
    )


def test_a_capture_dir_that_does_not_exist_is_refused_in_one_line(tmp_path):
    """A typo in ``--capture-dir`` gave a page, exit 0 and no word on stderr."""
    _run(tmp_path, "a", "echo from-run-a")
    out = tmp_path / "a.html"
    result = run_cli("report", "a.jsonl", "--capture-dir", "nonexist", "-o", out, cwd=tmp_path)
    assert result.returncode == 111, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.decode().splitlines() == [
        "processkit-cli: cannot read --capture-dir nonexist: No such file or directory"
    ], result.stderr
    assert not out.exists()
