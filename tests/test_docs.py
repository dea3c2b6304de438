"""Every document the code cites exists in the repository, with the section it names."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"docs/([a-z0-9-]+\.md)((?:[ ,]+§[0-9.]+(?:-§[0-9.]+)?)*)")


def _citations():
    for directory in ("processkit", "tests", "bench"):
        for path in (ROOT / directory).rglob("*"):
            if path.suffix in (".py", ".json", ".c", ".h") and path.is_file():
                for match in CITATION.finditer(path.read_text(encoding="utf-8", errors="replace")):
                    yield path.relative_to(ROOT), match[1], re.findall(r"§([0-9.]+)", match[2])


def test_every_cited_document_and_section_exists():
    found = list(_citations())
    assert len(found) > 30
    for where, name, sections in found:
        document = ROOT / "docs" / name
        assert document.is_file(), f"{where} cites docs/{name}, which does not exist"
        headings = set(re.findall(r"^#+ §([0-9.]+) ", document.read_text(encoding="utf-8"), re.MULTILINE))
        for section in sections:
            assert section.rstrip(".") in headings, f"{where} cites docs/{name} §{section}, which has no such section"


def test_no_citation_points_outside_the_repository():
    bare = re.compile(r"(?<![/\w-])(run|events|control-plane)\.md")
    for directory in ("processkit", "tests"):
        for path in (ROOT / directory).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert not bare.search(text), f"{path.relative_to(ROOT)} cites a document outside docs/"


def test_no_document_tells_users_to_install_processkit_from_a_package_index():
    """processkit is not on a registry (issue 23, item 14): installs are from a clone or a wheel."""
    by_name = re.compile(r"pip install\s+['\"]?processkit(?:\[[a-z,]+\])?['\"]?(?=\s|$)", re.MULTILINE)
    documents = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "skills").rglob("*.md")]
    offenders = [str(path.relative_to(ROOT)) for path in documents if by_name.search(path.read_text(encoding="utf-8"))]
    assert offenders == []
    fleet = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    assert "pip install '.[dask]'" in fleet and "pip wheel --no-deps -w dist ." in fleet


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "skills").rglob("*.md"))]
REPO_PATH = re.compile(r"(?<![\w./-])((?:processkit|tests|csrc|\.ci|man|skills|bench)/[\w./-]*\w)(?:::(\w+))?")
# the reference's own tests (Rust), a generated file, the examples a page gives of a user's tree
NOT_OURS = re.compile(r"\.rs$|__pycache__|^tests/(?:unit|db|test_x\.py)$")


def _stale_paths(text: str):
    """The repository paths (and ``path::test``) a text names that the tree does not have."""
    for match in REPO_PATH.finditer(text):
        path, test = match[1], match[2]
        if NOT_OURS.search(path):
            continue
        if not (ROOT / path).exists():
            yield path
        elif test and not re.search(rf"^def {test}\(", (ROOT / path).read_text(encoding="utf-8"), re.M):
            yield f"{path}::{test}"


def test_every_repository_path_a_document_names_exists():
    stale = [(str(doc.relative_to(ROOT)), path) for doc in DOCUMENTS for path in _stale_paths(doc.read_text("utf-8"))]
    assert stale == []
    named = "see tests/test_gone.py, tests/test_docs.py::test_gone and tests/test_docs.py (`tests/unit` is a user's)"
    assert list(_stale_paths(named)) == ["tests/test_gone.py", "tests/test_docs.py::test_gone"]
