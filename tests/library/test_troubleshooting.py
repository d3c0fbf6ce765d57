"""docs/troubleshooting.md cannot rot: every check (`path:function`) and test (`tests/...py::test`) it names
exists, every file it names exists, and every message it lists links to where it was reported and names a check
or says that none catches it."""

from __future__ import annotations

import ast
import re
from functools import cache

import pytest

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "troubleshooting.md"
TEST = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
CHECK = re.compile(r"`((?:infra|hpctl|stacks|lifecycle_scripts)/[\w/]+\.(?:py|sh)):(\w+)`")
FILE = re.compile(r"`((?:infra|hpctl|stacks|lifecycle_scripts|tests)/[\w/.]+\.(?:py|sh))`")


@cache
def _defined(path: str) -> frozenset[str]:
    """Every function and class name defined anywhere in a Python file; every function of a shell script."""
    text = (ROOT / path).read_text(encoding="utf-8")
    if path.endswith(".sh"):
        return frozenset(re.findall(r"^(\w+)\(\)", text, flags=re.MULTILINE))
    tree = ast.parse(text)
    return frozenset(node.name for node in ast.walk(tree)
                     if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))


def _module_tests(path: str) -> frozenset[str]:
    """The test functions pytest collects from a file: module-level functions named test_*."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return frozenset(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_"))


def _entries() -> list[tuple[str, str]]:
    """(message heading, body) of every ### entry."""
    parts = re.split(r"^### (.+)$", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize(("pattern", "defined"), [(TEST, _module_tests), (CHECK, _defined)], ids=["tests", "checks"])
def test_every_named_test_and_check_exists(pattern, defined):
    named = pattern.findall(PAGE.read_text(encoding="utf-8"))
    assert len(named) >= 10
    for path, name in named:
        assert (ROOT / path).is_file(), path
        assert name in defined(path), f"{path}: {name} is not defined there"


def test_every_named_file_exists():
    for path in FILE.findall(PAGE.read_text(encoding="utf-8")):
        assert (ROOT / path).is_file(), path


def test_every_message_is_linked_and_checked_or_said_not_to_be():
    entries = _entries()
    assert len(entries) >= 9
    for heading, body in entries:
        assert heading.startswith('"') and heading.endswith('"'), heading  # quoted as reported
        assert re.search(r"Reported.*\]\(https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+\)", body), heading
        assert CHECK.search(body) or "Not caught" in body, heading
        assert TEST.search(body), heading


def test_the_page_is_linked_from_the_readme_and_hpctl_docs():
    assert "docs/troubleshooting.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "troubleshooting.md" in (ROOT / "docs" / "hpctl.md").read_text(encoding="utf-8")
