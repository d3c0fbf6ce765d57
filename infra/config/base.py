"""The schema's foundations: the strict model every section is, how a validator refuses a value, and how the
refusals of one validation become one ConfigError."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from infra.errors import ConfigError

# The pydantic error type of a refusal (see ``refusal``).
REFUSAL = "config_refusal"


class StrictModel(BaseModel):
    """A config section: unknown keys are refused, values are frozen, strings are stripped."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


def refusal(key: str, value: Any, reason: str) -> PydanticCustomError:
    """The one way a validator refuses a config: ``raise refusal(key, value, reason)``.

    ``key`` is the dotted path below the field or section being validated ("" for the field itself): pydantic
    knows where the section sits, so a section reports the same key wherever it is used. ``value`` is what the
    message shows after the reason (None shows nothing).
    """
    return PydanticCustomError(REFUSAL, "{reason}", {"key": key, "value": value, "reason": reason})


@contextmanager
def refusing() -> Iterator[None]:
    """Inside a validator, run a rule the constructs check too (it raises ConfigError): refuse with its key,
    value and reason, so the file's message and a construct's message come from the same statement."""
    try:
        yield
    except ConfigError as error:
        raise refusal(error.key, error.value, error.reason) from None


def _key(location: tuple[Any, ...]) -> str:
    # A key from the file may hold anything, line breaks included: quote the odd ones so the message stays
    # on one line and shows exactly what was written. "function-..." steps are pydantic's validator names.
    parts = [str(p) if str(p).isprintable() and str(p).strip() == str(p) and str(p) else repr(p)
             for p in location if not str(p).startswith("function-")]
    return ".".join(parts) or "<root>"


def _problem(error: dict[str, Any]) -> tuple[str, Any, str]:
    """(key, value, reason) of one pydantic error, a refusal or one of pydantic's own checks."""
    location = tuple(error["loc"])
    kind = error["type"]
    if kind == REFUSAL:
        context = error["ctx"]
        below = tuple(context["key"].split(".")) if context["key"] else ()
        return _key(location + below), context["value"], context["reason"]
    value = error.get("input")
    if kind == "extra_forbidden":
        return _key(location), None, f"unknown key (check the spelling; value {value!r})"
    if kind == "missing":
        return _key(location), None, "required key is missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    if value is None:  # to ConfigError None means "nothing to show"; a null in the file is worth showing
        message += " (got None)"
    return _key(location), value, message


def config_error(error: ValidationError, source: str) -> ConfigError:
    """Every problem pydantic found in one validation, as one ConfigError naming each key."""
    return ConfigError.many(source, [_problem(dict(item)) for item in error.errors()])
