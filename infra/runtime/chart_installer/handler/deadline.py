"""The installer's time limits, and the deadline every download and command of one invocation keeps."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .errors import DeadlineExceededError

# The installer function's time limit (HelmInstaller sets it from here). It is a minute shorter than the
# provider framework's onEvent function, which aws-cdk-lib fixes at 15 minutes (FRAMEWORK_HANDLER_TIMEOUT in
# custom-resources/lib/provider-framework/provider.js of aws-cdk-lib 2.275.0): the framework outlives a killed
# installer and still reports FAILED.
FUNCTION_TIMEOUT_SECONDS = 14 * 60
# helm --timeout bounds one operation (a wait, a hook); the deadline below bounds the whole run.
DEFAULT_TIMEOUT_MINUTES = 10
MAX_TIMEOUT_MINUTES = 12
# Time kept back from the Lambda's limit for reporting the result.
DEADLINE_MARGIN_SECONDS = 45
# Kept back while a new release installs, to uninstall it again if the install fails.
CLEANUP_RESERVE_SECONDS = 90
# A command is not started with less time than this.
MIN_COMMAND_SECONDS = 30


@dataclass(frozen=True)
class Deadline:
    """When this invocation must have answered, as a time.monotonic() value."""

    at: float

    @staticmethod
    def after(seconds: float) -> Deadline:
        return Deadline(time.monotonic() + seconds)

    def seconds_left(self, keep: float = 0) -> float:
        """Seconds the next step may take, keeping ``keep`` seconds and the reporting margin back."""
        left = self.at - time.monotonic() - DEADLINE_MARGIN_SECONDS - keep
        if left < MIN_COMMAND_SECONDS:
            raise DeadlineExceededError("too little of the installer's time is left to go on")
        return left


def lambda_deadline(context: Any) -> Deadline:
    """When this invocation will be stopped: from the Lambda context, else the function's own time limit."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return Deadline.after(remaining() / 1000 if callable(remaining) else FUNCTION_TIMEOUT_SECONDS)
