"""The README is an entry point: what this is, the two commands, who reads what, and links that resolve. The
details live in docs/ (configuration, deploy, development, bench)."""

from __future__ import annotations

import re

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_short_and_says_what_it_is_the_two_commands_and_who_reads_what() -> None:
    assert len(README.encode()) < 6000, len(README.encode())
    headings = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    assert headings[:2] == ["Two commands", "Who reads what"]
    assert "make synth" in README and "make test" in README


def test_every_local_link_of_the_readme_resolves_and_no_benchmark_log_is_left() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert links
    for link in links:
        if not link.startswith("http"):
            assert (ROOT / link).exists(), link
    assert "bench.md" in README and not re.search(r"\bratio\b.*\d\.\d\d", README)


def test_the_sections_moved_out_of_the_readme_are_in_docs() -> None:
    for page, heading in (("configuration.md", "# Configuration"), ("deploy.md", "## Stacks"),
                          ("development.md", "## Feature flags"), ("bench.md", "# Speed")):
        assert heading in (ROOT / "docs" / page).read_text(encoding="utf-8"), page
