"""The installer's time limits, and the deadline (``common.deadline.Deadline``) every download and command of one
invocation keeps."""

from __future__ import annotations

from typing import Any

from ...common.deadline import Deadline

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

__all__ = ["CLEANUP_RESERVE_SECONDS", "DEADLINE_MARGIN_SECONDS", "DEFAULT_TIMEOUT_MINUTES", "FUNCTION_TIMEOUT_SECONDS",
           "MAX_TIMEOUT_MINUTES", "MIN_COMMAND_SECONDS", "Deadline", "lambda_deadline"]


def lambda_deadline(context: Any) -> Deadline:
    """When this invocation must have answered: from the Lambda context, else the function's own time limit, less
    the reporting margin; no command starts with less than MIN_COMMAND_SECONDS."""
    return Deadline.of(context, fallback_seconds=FUNCTION_TIMEOUT_SECONDS, margin=DEADLINE_MARGIN_SECONDS,
                       minimum_step=MIN_COMMAND_SECONDS)

