"""Teams install the library beside their own dependencies: pyproject.toml gives compatible ranges, the lock pins
the tested versions exactly, and `make install` (what CI runs) installs the lock."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _dependencies(path: str) -> list[Requirement]:
    project = tomllib.loads((ROOT / path).read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]]


def test_the_library_and_hpctl_alone_declare_ranges_the_lock_satisfies() -> None:
    pins = _lock()
    for path in ("pyproject.toml", "packaging/hpctl/pyproject.toml"):
        for requirement in _dependencies(path):
            specifiers = list(requirement.specifier)
            assert not any(s.operator in {"==", "==="} for s in specifiers), f"{path}: {requirement} is a pin"
            assert any(s.operator == "<" for s in specifiers), f"{path}: {requirement} has no upper bound"
            pinned = pins[canonicalize_name(requirement.name)]
            assert requirement.specifier.contains(pinned), f"{path}: {requirement} excludes the lock's {pinned}"


def test_hpctl_alone_declares_the_same_ranges_as_the_library() -> None:
    library = {canonicalize_name(r.name): str(r.specifier) for r in _dependencies("pyproject.toml")}
    for requirement in _dependencies("packaging/hpctl/pyproject.toml"):
        assert library[canonicalize_name(requirement.name)] == str(requirement.specifier), requirement


def test_make_install_installs_exactly_the_lock() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"pip install .*-c requirements\.lock .*-e '\.\[dev\]'", makefile)
