"""The one exception users see for a bad configuration: it names the key, the value and the fix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# A value, and a problem reported by the validator (which may quote the value), are shown in at most this
# many characters: a 10 MB value must not make a 10 MB message.
MAX_VALUE = 100
MAX_PROBLEM = 300


def _cap(text: str, limit: int = MAX_PROBLEM) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _worth_showing(value: Any) -> bool:
    """Whether ``(got <value>)`` is shown: not for None (nothing to show: the reason says it, or there is no
    value), nor for nested mappings and lists (a dump of a whole section says less than the key does)."""
    if value is None:
        return False
    if isinstance(value, dict | list):
        items = value.values() if isinstance(value, dict) else value
        return not any(isinstance(v, dict | list) for v in items)
    return True


def problem(key: str, value: Any, reason: str) -> str:
    """One problem as every config refusal shows it: ``<key>: <reason> (got <value>)``."""
    shown = f" (got {_cap(repr(value), MAX_VALUE)})" if _worth_showing(value) else ""
    return f"{key}: {reason}{shown}"


class ConfigError(ValueError):
    """A configuration mistake, reported before anything reaches AWS.

    Raised by code that checks the config outside its schema (the file reader, the constructs, the lock);
    validators inside the schema raise ``infra.config.base.refusal`` instead, which ``parse_config`` turns
    into this error with the same rendering. The message is one line:
    ``Invalid configuration in <source>: <key>: <reason> (got <value>); <next problem>...``.
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
        return problem(self.key, self.value, self.reason)

    def _render(self) -> str:
        where = f" in {self.source}" if self.source else ""
        return f"Invalid configuration{where}: " + "; ".join(self.problems) + "."

    def within(self, source: str) -> ConfigError:
        copy = ConfigError(self.key, self.value, self.reason, source=source)
        copy.problems = list(self.problems)
        copy.args = (copy._render(),)
        return copy

    @classmethod
    def many(cls, source: str, problems: Sequence[tuple[str, Any, str]]) -> ConfigError:
        """One error for several (key, value, reason) problems; the first gives key, value and reason."""
        key, value, reason = problems[0] if problems else ("<root>", None, "invalid")
        error = cls(key, value, reason, source=source)
        # A validator's reason may quote the value at length: each problem is capped, not only the value.
        error.problems = [_cap(problem(*p)) for p in problems] or error.problems
        error.args = (error._render(),)
        return error

    def __str__(self) -> str:
        return str(self.args[0])
