"""The one kind of failure the deploy-time handlers report, and the one way any exception becomes its reason.

The provider framework (aws-cdk-lib's custom resource ``Provider``) reports a failed user function with the
function's ``errorMessage``, which the Python Lambda runtime takes from ``str(exception)``, followed by the log
group and the stack trace: ``invokeUserFunction`` in aws-cdk-lib 2.275.0
custom-resources/lib/provider-framework/runtime/framework.js, and ``safeHandler`` in cfn-response.js of the same
directory. So the first line of what CloudFormation shows is this message, and it is kept to one line here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

# A reason is cut to this many characters, keeping its start and its end (helm and kubectl print the error that
# matters last). "The total size of the response body can't exceed 4096 bytes"
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html), and the framework adds
# the log group and the stack trace to the reason.
REASON_CHARS = 1000
ELISION = " ... "


def one_line(text: str, limit: int = REASON_CHARS) -> str:
    """``text`` on one line (every run of whitespace, newlines included, becomes one space), at most ``limit``
    characters: the first third and the last two thirds are kept around `` ... ``."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = (limit - len(ELISION)) // 3
    tail = limit - len(ELISION) - head
    return text[:head] + ELISION + text[-tail:]


class DeployError(Exception):
    """A failure reported to CloudFormation; its message, one line, is the reason an operator reads."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class DeadlineExceededError(DeployError):
    """A step did not start or finish in the time left to this invocation."""


def failure_reason(error: BaseException) -> str:
    """The one line CloudFormation shows for ``error``: a ``DeployError``'s message as it is, any other exception
    (a botocore error, a bug) as its type and message, e.g. ``KeyError: 'addon'``."""
    if isinstance(error, DeployError):
        return str(error)
    return one_line(f"{type(error).__name__}: {error}")


Handler = Callable[[Mapping[str, Any], Any], dict[str, Any]]


def reports_failures(handler: Handler) -> Handler:
    """A Lambda entry point whose every failure is a ``DeployError`` with a one-line reason: its own errors pass
    as they are, any other exception becomes ``failure_reason(error)`` (chained, so the log keeps its trace)."""

    @functools.wraps(handler)
    def entry_point(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        try:
            return handler(event, context)
        except DeployError:
            raise
        except Exception as error:
            raise DeployError(failure_reason(error)) from error

    return entry_point
