"""The reference's probe flags read their numbers with Rust's unsigned parse (its
``parse_exit_code_band`` splits at the first ``-`` and parses each side as a ``u8``;
``--require-schema-version`` is clap's ``u32``), which takes a leading ``+`` and leading
zeros. A launcher's preflight written against it must get the same verdict here."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def _probe(*flags):
    done = run_cli("probe", "--json", *flags)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None


@pytest.mark.parametrize("band", ["+100-119", "100-+119", "0100-119", "100-00119"])
def test_a_band_in_rusts_unsigned_syntax_is_read_as_the_reference_reads_it(band):
    code, report = _probe("--require-exit-code-band", band)
    assert code == 0, band
    assert report["compatible"] is True


def test_a_band_read_that_way_still_names_the_mismatch_by_its_numbers():
    code, report = _probe("--require-exit-code-band", "+100-0118")
    assert code == 110
    assert report["mismatches"] == ["requires exit-code band 100-118, but this binary reserves 100-119"]


@pytest.mark.parametrize("band", ["100-119-", "100--119", "100-", "-119", "256-257", "119-100", " 100-119", "100-1_19"])
def test_what_rust_would_not_parse_is_still_a_usage_error(band):
    code, _ = _probe(f"--require-exit-code-band={band}")
    assert code == 100, band


def test_a_schema_version_in_rusts_unsigned_syntax_is_read_as_the_reference_reads_it():
    assert _probe("--require-schema-version", "+1")[0] == 0
    assert _probe("--require-schema-version", "01")[0] == 0
    code, report = _probe("--require-schema-version", "+2")
    assert code == 110
    assert report["mismatches"] == ["requires JSONL schema_version 2, but this binary emits 1"]
    assert _probe("--require-schema-version", "4294967296")[0] == 100
