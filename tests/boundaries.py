"""Deploy-time handler tests run with every boundary (AWS, helm, kubectl, the network) replaced: a test that
forgets a fake fails instead of reaching out."""

from __future__ import annotations

from typing import Any

import pytest


def refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"unfaked boundary called with {args!r}")


def refuse_all(monkeypatch: pytest.MonkeyPatch, *boundaries: tuple[object, str]) -> None:
    """Replace each ``(module, name)`` with a function that fails the test when called."""
    for module, name in boundaries:
        monkeypatch.setattr(module, name, refuse)
