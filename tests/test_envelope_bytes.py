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
