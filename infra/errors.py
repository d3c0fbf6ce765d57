"""The one exception users see for a bad configuration: it names the key, the value and the fix."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# A value, and a problem reported by the validator (which may quote the value), are shown in at most this
# many characters: a 10 MB value must not make a 10 MB message.
MAX_VALUE = 100
MAX_PROBLEM = 300


# Text that is, or holds, a credential: what redact() hides in every message and what the config refuses in a
# value (``credential_kind``). The token shapes are the issuers' own documented prefixes:
# - AWS access key IDs: AKIA (long-term) and ASIA (temporary) then 16 upper-case letters and digits
#   (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids,
#   "Understanding unique ID prefixes");
# - GitHub tokens: ghp_, gho_, ghu_, ghs_, ghr_ and github_pat_
#   (https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/);
# - GitLab personal access tokens: glpat- (https://docs.gitlab.com/security/tokens/, "Token prefixes");
# - Slack tokens: xoxb-, xoxp-, xoxa-, xoxr-, xoxs- (https://api.slack.com/authentication/token-types);
# - PEM private keys: "-----BEGIN ... PRIVATE KEY-----" (RFC 7468, section 2);
# - user:password@ in a URL (RFC 3986, section 3.2.1, userinfo), and the value after "Bearer " or "Basic ".
# The list is best effort: a credential of another shape is not recognised.
CREDENTIAL_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a URL with a user name or password", re.compile(r"(?<=://)[^/\s:@]*:[^/\s@]*(?=@)|(?<=://)[^/\s:@]+(?=@)")),
    ("an AWS access key ID", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[^-]*(?:-----END [A-Z ]*PRIVATE KEY-----)?")),
    ("an authorization header",
     re.compile(r"(?<=\b[Bb]earer )[A-Za-z0-9._~+/=-]{8,}|(?<=\b[Bb]asic )[A-Za-z0-9+/=]{8,}")),
)
REDACTED = "***"


def credential_kind(text: str) -> str | None:
    """What credential ``text`` holds ("a GitHub token"), or None when it holds none of CREDENTIAL_SHAPES."""
    return next((kind for kind, shape in CREDENTIAL_SHAPES if shape.search(text)), None)


def redact(text: str) -> str:
    """``text`` with every credential of CREDENTIAL_SHAPES replaced by ``***``: the one redaction of every
    message a user sees (config errors, app.py's error line, hpctl's stderr)."""
    for _, shape in CREDENTIAL_SHAPES:
        text = shape.sub(REDACTED, text)
    return text


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
    # Redacted before the cut, so a credential cut in half is still recognised.
    shown = f" (got {_cap(redact(repr(value)), MAX_VALUE)})" if _worth_showing(value) else ""
    return redact(f"{key}: {reason}") + shown


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
        return redact(str(self.args[0]))
