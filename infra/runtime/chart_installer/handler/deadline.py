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
# Kept back, while waiting before an install (for CRD kinds, for another run's operation), for the install itself
# and its cleanup.
INSTALL_RESERVE_SECONDS = 3 * 60 + CLEANUP_RESERVE_SECONDS
# Kept back on Delete from the first, hooked uninstall for the fallbacks after it (an uninstall without hooks,
# then the deletion of helm's record of the release), which run no hook and wait for nothing.
UNINSTALL_FALLBACK_RESERVE_SECONDS = 3 * 60
# A release operation (pending-install, -upgrade, -rollback) started at most this long ago may belong to another
# invocation of this function that is still running: the provider framework can invoke it again while the first
# run upgrades. Beyond it, whatever started the operation has been stopped (helm runs as a child of an invocation,
# which Lambda stops at FUNCTION_TIMEOUT_SECONDS). The minute more covers the clocks of two Lambda environments.
CLOCK_SKEW_SECONDS = 60
STALE_OPERATION_SECONDS = FUNCTION_TIMEOUT_SECONDS + CLOCK_SKEW_SECONDS

__all__ = ["CLEANUP_RESERVE_SECONDS", "DEADLINE_MARGIN_SECONDS", "DEFAULT_TIMEOUT_MINUTES", "FUNCTION_TIMEOUT_SECONDS",
           "INSTALL_RESERVE_SECONDS", "MAX_TIMEOUT_MINUTES", "MIN_COMMAND_SECONDS", "STALE_OPERATION_SECONDS",
           "UNINSTALL_FALLBACK_RESERVE_SECONDS", "Deadline", "lambda_deadline"]


def lambda_deadline(context: Any) -> Deadline:
    """When this invocation must have answered: from the Lambda context, else the function's own time limit, less
    the reporting margin; no command starts with less than MIN_COMMAND_SECONDS."""
    return Deadline.of(context, fallback_seconds=FUNCTION_TIMEOUT_SECONDS, margin=DEADLINE_MARGIN_SECONDS,
                       minimum_step=MIN_COMMAND_SECONDS)

