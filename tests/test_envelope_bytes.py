"""The ``--error-format json`` envelope names a path that is not UTF-8 (an agent's scratch
directory with a Latin-1 name, say) as the reference's lossy ``display`` renders it: U+FFFD for
each undecodable byte. The runner wrote Python's stand-in for such a byte as a JSON escape
(``"f\\udcff"``), a lone surrogate that strict parsers refuse: the envelope, its ``code`` and
``kind`` with it, could not be read at all."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli


def _strict(line: bytes) -> dict:
    """The line as a strict parser reads it: UTF-8, and no surrogate, escaped or not."""
    envelope = json.loads(line.decode("utf-8"))
    surrogates = [
        ch for value in envelope.values() if isinstance(value, str) for ch in value if "\ud800" <= ch <= "\udfff"
    ]
    assert not surrogates, envelope
    return envelope


@pytest.mark.parametrize("flag", ["--capture-dir", "--stdin-file", "--cwd"])
def test_a_path_that_is_not_utf8_is_named_lossily_in_the_envelope(tmp_path, flag):
    (tmp_path / "f\udcff").write_bytes(b"")  # a file: no capture directory, no working directory
    named = "f\udcff" if flag != "--stdin-file" else "f\udcff/x"
    done = run_cli("--error-format", "json", "run", "--jsonl", "run.jsonl", flag, named, "--", "true", cwd=tmp_path)
    assert done.returncode in (101, 111), done.stderr
    envelope = _strict(done.stderr.splitlines()[-1])
    assert envelope["code"] == done.returncode, envelope
    assert "f\ufffd" in envelope["message"], envelope


NAMED = "g\udcfe\udcff"  # the bytes 0xFE 0xFF, which no UTF-8 text holds
# (the arguments, in a directory holding the regular file ``plain``, so no path under it is made;
# the name each message holds)
UNMADE = {
    "batch": (["batch", f"{NAMED}.jsonl"], f"{NAMED}.jsonl"),
    "events": (["events", "--file", f"{NAMED}.jsonl"], f"{NAMED}.jsonl"),
    "bench": (["bench", "--runs", "1", "--export-json", f"plain/{NAMED}.json", "true"], f"plain/{NAMED}.json"),
    "batch --junit": (
        ["batch", "--junit", f"plain/{NAMED}.xml", "--out", "o", "--", "true", ":::", "1"],
        f"plain/{NAMED}.xml",
    ),
    "run --usage-file": (
        ["run", "--jsonl", "run.jsonl", "--usage-file", f"plain/{NAMED}", "--", "true"],
        f"plain/{NAMED}",
    ),
}


@pytest.mark.parametrize("error_format", ["human", "json"])
@pytest.mark.parametrize("case", sorted(UNMADE))
def test_a_path_that_is_not_utf8_is_named_as_given(tmp_path, case, error_format):
    """A message naming a path that is not UTF-8 named ``g  .jsonl`` (its undecoded bytes as
    spaces), a file that does not exist: the human line escapes them (``g\\udcfe\\udcff``), the
    envelope has U+FFFD for each, as ``--capture-dir``'s do."""
    (tmp_path / "plain").write_bytes(b"")
    argv, named = UNMADE[case]
    done = run_cli("--error-format", error_format, *argv, cwd=tmp_path)
    if error_format == "json":
        if case == "run --usage-file":  # a warning, which the envelope's format leaves unsaid
            assert done.returncode == 0 and not done.stderr, done.stderr
            return
        assert done.returncode == 111, done.stderr
        assert (
            named.replace("\udcfe", "\ufffd").replace("\udcff", "\ufffd")
            in _strict(done.stderr.splitlines()[-1])["message"]
        )
    else:
        assert named.encode("unicode_escape").decode("ascii") in done.stderr.decode(), done.stderr


def test_a_batch_out_named_with_a_newline_is_said_whole_where_its_page_cannot_be_drawn(tmp_path):
    """The page's process says why it drew no page on its stderr, which the batch reads back a
    line at a time: the message is escaped first, so a newline in ``--out``'s name does not cut
    it to a tail naming a path that does not exist."""
    out = "pg\nX"
    job = 'mkdir -p "$0/index.html/sub"'
    done = run_cli("batch", "--out", out, "--", "sh", "-c", job, out, ":::", "1", cwd=tmp_path)
    assert b"no index.html: cannot write pg\\nX/index.html" in done.stderr, done.stderr


def test_the_envelope_names_a_batchs_out_as_given(tmp_path):
    """``--error-format json``'s failed-jobs message names ``--out`` as given (JSON escapes it),
    as every other path in an envelope, not in the terminal's escaped form."""
    out = "q\x1b[1m"
    done = run_cli(
        "--error-format", "json", "batch", "--out", out, "--", "sh", "-c", "exit 1", ":::", "1", cwd=tmp_path
    )
    envelope = json.loads(done.stderr.splitlines()[-1])
    assert envelope["message"].endswith(f"see {out}/summary.jsonl"), envelope


@pytest.mark.parametrize("error_format", ["human", "json"])
def test_a_manifest_that_is_no_regular_file_is_named_as_given(tmp_path, error_format):
    """The bounded readers' messages (a manifest that is a directory, too large, not JSON) named
    the path through ``sanitize``: ``g  .d``, spaces for the undecoded bytes, a path that does not
    exist. It is given as it was typed, escaped on the human line, U+FFFD in the envelope."""
    (tmp_path / f"{NAMED}.d").mkdir()
    done = run_cli("--error-format", error_format, "batch", f"{NAMED}.d", cwd=tmp_path)
    assert done.returncode == 111, done.stderr
    if error_format == "json":
        message = _strict(done.stderr.splitlines()[-1])["message"]
        assert message == "cannot read the manifest g\ufffd\ufffd.d: it is a directory", message
    else:
        assert done.stderr == b"processkit-cli: cannot read the manifest g\\udcfe\\udcff.d: it is a directory\n"


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("--input", "the file '{}' specified as '--input' does not exist"),
        ("--output", "unknown '--output' '{}': use './{}' for a file of that name"),
    ],
)
def test_benchs_usage_errors_name_a_path_as_given(tmp_path, flag, said):
    """hyperfine's ``--input``/``--output`` refusals named the path through ``sanitize`` (spaces for
    the bytes no UTF-8 holds): the path as given, escaped on the line."""
    done = run_cli("bench", "--runs", "1", flag, NAMED, "true", cwd=tmp_path)
    assert done.returncode == 100, done.stderr
    shown = NAMED.encode("unicode_escape").decode("ascii")
    assert done.stderr.decode() == f"processkit-cli: {said.format(shown, shown)}\n", done.stderr
