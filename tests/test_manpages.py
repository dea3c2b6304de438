"""The man pages: generated from the parsers (the committed ones equal a fresh generation),
installed with the package into <prefix>/share/man/man1, and rendered by the real ``man``."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from control_support import json_out
from surface import reported_flags

SOURCE_PAGES = Path(__file__).resolve().parents[1] / "man" / "man1"
INSTALLED_PAGES = Path(sys.prefix) / "share" / "man" / "man1"
RENDER_ENV = {**os.environ, "LC_ALL": "C", "MANWIDTH": "200", "MANPAGER": "cat", "PAGER": "cat"}


def render(*args) -> str:
    if shutil.which("man") is None or shutil.which("nroff") is None:
        pytest.skip("man (man-db and groff) is not installed")
    proc = subprocess.run(["man", *args], capture_output=True, text=True, timeout=60, env=RENDER_ENV)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_committed_pages_equal_a_fresh_generation_from_the_parsers():
    pytest.importorskip("argparse_manpage")
    spec = importlib.util.spec_from_file_location("generate_man", SOURCE_PAGES.parent / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    assert generate.stale() == [], "run: python man/generate.py"


def test_every_subcommand_has_an_installed_page_equal_to_the_source():
    expected = {"processkit-cli.1"} | {f"processkit-cli-{command}.1" for command in reported_flags()}
    installed = {path.name for path in INSTALLED_PAGES.glob("processkit-cli*.1")}
    assert installed == expected, "reinstall the package (pip install -e .) after regenerating the pages"
    for name in expected:
        assert (INSTALLED_PAGES / name).read_bytes() == (SOURCE_PAGES / name).read_bytes(), name


def test_each_page_renders_with_man_l_and_documents_every_flag():
    for command, flags in reported_flags().items():
        text = render("-l", str(SOURCE_PAGES / f"processkit-cli-{command}.1"))
        assert text.startswith(f"PROCESSKIT-CLI-{command.upper()}(1)"), text[:200]
        for heading in (
            "NAME",
            "SYNOPSIS",
            "(GLOBAL )?OPTIONS" if flags else "DESCRIPTION",
            "EXIT STATUS",
            "FILES",
            "SEE ALSO",
        ):
            assert re.search(rf"^{heading}$", text, re.M), (command, heading)
        documented = set(re.findall(r"^ +(?:-[A-Za-z](?: \[?[A-Z]+\]?)*, )?(--[a-z][a-z0-9-]*)", text, re.M))
        assert flags <= documented, (command, flags - documented)


def test_man_finds_the_installed_pages_under_the_prefix():
    text = render("-M", str(INSTALLED_PAGES.parent), "processkit-cli-run")
    assert "processkit-cli-run - run one command" in text and "--capture-overflow" in text
    text = render("-M", str(INSTALLED_PAGES.parent), "processkit-cli")
    band = json_out(run_cli("probe", "--json"))["exit_code_band"]
    assert f"reserved band {band['start']}-{band['end']}" in text
    for command in reported_flags():
        assert f"processkit-cli-{command}(1)" in text, command


def test_the_exit_status_section_is_the_binarys_own_table():
    """The man page and ``processkit-cli --help`` print one table: what one says, the other does."""
    helped = run_cli("--help").stdout.decode()
    table = dict(re.findall(r"^  (1[0-9]{2})  (.+)$", helped, re.M))
    assert table, helped
    text = render("-l", str(SOURCE_PAGES / "processkit-cli.1"))
    rendered = {
        code: " ".join(meaning.split())
        for code, meaning in re.findall(r"^ {7}(1[0-9]{2}) +(.+(?:\n {14}.+)*)", text, re.M)
    }
    assert rendered == table


def test_the_batch_page_says_the_batchs_own_exit_not_a_childs():
    """A batch never exits with a job's code (117 for any failure, not parallel's count): its page
    said what every page said, a run's "The child's own exit code when the run ended with it"."""
    text = render("-l", str(SOURCE_PAGES / "processkit-cli-batch.1"))
    status = " ".join(text.split("\nEXIT STATUS\n", 1)[1].split("\nFILES\n", 1)[0].split())
    assert "child's own exit code" not in status, status
    assert status.startswith("0 when every job exited 0 (or there was none to run); 117, batch_failed,"), status
    assert "not GNU parallel's count of failed jobs" in status, status
    assert "; 100 for a bad manifest or flag; 111 when the manifest cannot be read, --out cannot" in status, status


def test_the_batch_pages_synopsis_gives_each_usage_form_its_own_line():
    """``batch --help`` has two forms (a MANIFEST, a template after ``--``); the page's SYNOPSIS
    once ran them into one paragraph, the second ``processkit-cli batch`` mid-line."""
    text = render("-l", str(SOURCE_PAGES / "processkit-cli-batch.1"))
    synopsis = text.split("SYNOPSIS", 1)[1].split("DESCRIPTION", 1)[0]
    starts = [line.strip() for line in synopsis.splitlines() if "processkit-cli" in line]
    assert len(starts) == 2, synopsis
    assert starts[0].startswith("processkit-cli batch <MANIFEST>"), synopsis
    assert re.match(r"processkit-cli\s+batch\s+\[OPTIONS\]", starts[1]), synopsis
