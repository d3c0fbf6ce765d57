"""What a command says on stderr, and the confirmation it asks for on the terminal before a change."""

from __future__ import annotations

import re
import sys

from hpctl.errors import UsageError
from hpctl.output import is_terminal
from infra.errors import redact


def err(message: str) -> None:
    """A line on stderr, after `hpctl: `, credentials redacted (``infra.errors.redact``)."""
    print(f"hpctl: {redact(message)}", file=sys.stderr)


def _ask(prompt: str) -> str:  # replaced in tests
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return input()


def _stdin_is_terminal() -> bool:  # replaced in tests
    return is_terminal(sys.stdin)


def confirm(question: str, yes: bool) -> bool:
    """True with --yes or a "y" answer; UsageError when it would have to ask but stdin is not a terminal."""
    if yes:
        return True
    if not _stdin_is_terminal():
        # One line: what it would do (the question up to its first "?" or ": ", not the nodes it lists after).
        what = re.split(r"\?|: ", question, maxsplit=1)[0].strip()
        raise UsageError(f"needs confirmation but stdin is not a terminal: pass --yes to {what[:1].lower()}{what[1:]}")
    return _ask(f"{question} [y/N] ").strip().lower() in {"y", "yes"}
