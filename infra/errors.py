"""The one exception users see for a bad configuration: it names the key, the value and the fix."""

from __future__ import annotations

from typing import Any

# A value, and a problem reported by the validator (which may quote the value), are shown in at most this
# many characters: a 10 MB value must not make a 10 MB message.
MAX_VALUE = 100
MAX_PROBLEM = 300


def _cap(text: str, limit: int = MAX_PROBLEM) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ConfigError(ValueError):
    """A configuration mistake, reported before anything reaches AWS.

    Subclasses ValueError so that pydantic validators may raise it and keep it as the error's cause.
    """

    def __init__(self, key: str, value: Any, reason: str, *, source: str | None = None) -> None:
        self.key = key
        self.value = value
        self.reason = reason
        self.source = source
        self.problems = [self.detail]
        super().__init__(self._render())

    @property
    def detail(self) -> str:
        shown = "" if self.value is None else f" (got {_cap(repr(self.value), MAX_VALUE)})"
        return f"{self.key}: {self.reason}{shown}"

    def _render(self) -> str:
        where = f" in {self.source}" if self.source else ""
        return f"Invalid configuration{where}: " + "; ".join(self.problems) + "."

    def within(self, source: str) -> ConfigError:
        copy = ConfigError(self.key, self.value, self.reason, source=source)
        copy.problems = list(self.problems)
        copy.args = (copy._render(),)
        return copy

    @classmethod
    def many(cls, source: str, problems: list[str]) -> ConfigError:
        first = problems[0] if problems else "<root>: invalid"
        error = cls(first.split(":", 1)[0], None, first.split(":", 1)[-1].strip(), source=source)
        error.problems = [_cap(p) for p in problems]
        error.args = (error._render(),)
        return error

    def __str__(self) -> str:
        return str(self.args[0])
