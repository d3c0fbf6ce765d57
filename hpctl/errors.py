"""Exit codes and the translation of AWS exceptions into one readable line."""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
    ProfileNotFound,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)
from botocore.parsers import ResponseParserError

# The exit-code table, shown in `hpctl --help` and docs/hpctl.md.
EXIT_OK = 0
EXIT_FAILED = 1  # drift, a failed check/node operation/software update, cluster Failed, no session opened
EXIT_USAGE = 2  # bad arguments, bad config file, refused confirmation without a terminal
EXIT_AWS = (
    3  # an AWS call failed (access denied, throttled after retries, not found, no credentials, network)
)
EXIT_TIMEOUT = 4  # `wait` or `update-software --wait` gave up before the cluster settled
EXIT_INTERRUPTED = 130  # Ctrl-C

# What an AWS call can raise: an error AWS answered, an SDK error (credentials, network), and an answer botocore
# cannot read (botocore/parsers.py: ResponseParserError derives from Exception, not BotoCoreError; the XML protocols
# raise it on a body that is not XML, e.g. a proxy's HTML page).
AWS_ERRORS = (ClientError, BotoCoreError, ResponseParserError)

# What each code means, for `hpctl --help` and docs/hpctl.md.
_EXIT_MEANINGS = {
    EXIT_OK: "success (no drift, every check passed, every node accepted)",
    EXIT_FAILED: "drift found, a check or node operation or software update failed, the cluster is Failed,\n"
    "     connect opened no session, or aborted",
    EXIT_USAGE: "usage or configuration error (also: confirmation needed but stdin is not a terminal)",
    EXIT_AWS: "AWS error (access denied, throttled after retries, not found, no credentials, endpoint unreachable)",
    EXIT_TIMEOUT: "timeout (wait, update-software --wait)",
}

_AWS = _EXIT_MEANINGS[EXIT_AWS]
_USAGE = "usage or configuration error"
_CONFIRM = f"{_USAGE} (also: confirmation needed but stdin is not a terminal)"
_KUBE = f"{_AWS}; also the Kubernetes API refusing a call, a job or endpoint not found, or the API server unreachable"
# The codes each command can return and what they mean there, for its --help. A command not listed shows them all.
COMMAND_EXIT_CODES: dict[str, dict[int, str]] = {
    "clusters": {EXIT_USAGE: _USAGE, EXIT_AWS: _AWS},
    "status": {EXIT_USAGE: _USAGE, EXIT_AWS: _AWS},
    "nodes": {EXIT_USAGE: f"{_USAGE} (also: no such --group)", EXIT_AWS: _AWS},
    "events": {EXIT_USAGE: f"{_USAGE} (also: no such --group)", EXIT_AWS: _AWS},
    "wait": {EXIT_FAILED: "the cluster is Failed", EXIT_USAGE: _USAGE, EXIT_AWS: _AWS,
             EXIT_TIMEOUT: "timeout: the cluster did not settle in time"},
    "quotas": {EXIT_FAILED: "--usage: kubectl failed, or no kube context or another cluster's", EXIT_USAGE: _USAGE,
               EXIT_AWS: _AWS},
    "connect": {EXIT_FAILED: "no session was opened", EXIT_USAGE: _USAGE, EXIT_AWS: _AWS},
    "ssh-config": {EXIT_USAGE: _USAGE, EXIT_AWS: _AWS},
    "reboot": {EXIT_FAILED: "a node was refused, or the prompt was answered no", EXIT_USAGE: _CONFIRM,
               EXIT_AWS: _AWS},
    "replace": {EXIT_FAILED: "a node was refused, or the prompt was answered no", EXIT_USAGE: _CONFIRM,
                EXIT_AWS: _AWS},
    "update-software": {EXIT_FAILED: "the update failed or rolled back, or the prompt was answered no",
                        EXIT_USAGE: _CONFIRM, EXIT_AWS: _AWS,
                        EXIT_TIMEOUT: "timeout: --wait gave up before the update finished"},
    "kubeconfig": {EXIT_USAGE: _USAGE, EXIT_AWS: _AWS},
    "drift": {EXIT_FAILED: "drift found", EXIT_USAGE: _USAGE, EXIT_AWS: _AWS},
    "preflight": {EXIT_FAILED: "a check failed", EXIT_USAGE: _USAGE, EXIT_AWS: _AWS},
    "pre-destroy": {EXIT_FAILED: "something of this cluster is still in the VPC, or the prompt was answered no",
                    EXIT_USAGE: _CONFIRM, EXIT_AWS: _AWS},
    "render-examples": {EXIT_USAGE: _USAGE},
    "plan": {EXIT_USAGE: _USAGE, EXIT_AWS: f"{_AWS} (--from-events)"},
    "monitoring": {EXIT_USAGE: f"{_USAGE} (also: observability is off in the config)",
                   EXIT_AWS: f"{_AWS} (also: the observability stack is not deployed)"},
    # hpctl jobs and hpctl endpoints SUBCOMMAND (the names are the subcommands'): the Kubernetes API's refusals count
    # as AWS errors.
    "submit": {EXIT_FAILED: "a job of the file exists already", EXIT_USAGE: f"{_USAGE} (also: a kind jobs does not "
               "submit)", EXIT_AWS: _KUBE},
    "list": {EXIT_USAGE: _USAGE, EXIT_AWS: _KUBE},
    "describe": {EXIT_USAGE: f"{_USAGE} (also: the name matches objects in several namespaces or kinds)",
                 EXIT_AWS: _KUBE},
    "invoke": {EXIT_USAGE: f"{_USAGE} (also: a --body that is not JSON with a JSON --content-type)",
               EXIT_AWS: f"{_KUBE}; also the SageMaker endpoint not registered or not InService yet"},
    "logs": {EXIT_USAGE: f"{_USAGE} (also: --rank of an MPIJob)", EXIT_AWS: _KUBE},
    "delete": {EXIT_FAILED: "the prompt was answered no", EXIT_USAGE: _CONFIRM, EXIT_AWS: _KUBE},
}


def exit_code_table(command: str | None = None) -> str:
    """The `exit codes:` block of a command's --help: only the codes it can return; all of them for hpctl's own."""
    meanings = dict(_EXIT_MEANINGS)
    if command in COMMAND_EXIT_CODES:
        meanings = {EXIT_OK: "success", **COMMAND_EXIT_CODES[command]}
    return "exit codes:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in sorted(meanings.items()))


EXIT_CODE_TABLE = exit_code_table()


class HpctlError(Exception):
    """An error to print as one line on stderr, with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(HpctlError):
    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


_THROTTLING = {
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "SlowDown",
}
_NOT_FOUND = {"ResourceNotFound", "ResourceNotFoundException", "NoSuchEntity", "NotFoundException"}


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", "Unknown"))


def is_not_found(error: ClientError) -> bool:
    """True for "does not exist" answers (SageMaker answers some with ValidationException)."""
    code = error_code(error)
    message = str(error.response.get("Error", {}).get("Message", "")).lower()
    if code in _NOT_FOUND:
        return True
    return code in {"ValidationException", "ValidationError"} and (
        "could not find" in message or "does not exist" in message or "not found" in message
    )


def one_line(text: str) -> str:
    """Collapse line breaks and runs of blanks: an AWS error body can span lines."""
    return " ".join(str(text).split())


# botocore's parser error quotes the whole body it could not read: the start of it is enough to recognise a page.
_PARSER_ERROR_CHARS = 160


def describe_aws_error(error: Exception, region: str | None = None) -> tuple[str, int]:
    """One line naming what went wrong and what to do, plus the exit code."""
    line, code = _describe(error, region)
    return one_line(line), code


def _describe(error: Exception, region: str | None) -> tuple[str, int]:
    if isinstance(error, ClientError):
        code = error_code(error)
        message = error.response.get("Error", {}).get("Message", "") or str(error)
        operation = getattr(error, "operation_name", "") or "the request"
        if code in _THROTTLING:
            return (
                f"AWS throttled {operation} even after retries ({code}): {message}; try again later",
                EXIT_AWS,
            )
        if "AccessDenied" in code or code in {"UnauthorizedOperation", "UnrecognizedClientException"}:
            return f"access denied for {operation} ({code}): {message}", EXIT_AWS
        if code in {"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId"}:
            return f"AWS credentials rejected for {operation} ({code}): refresh them and retry", EXIT_AWS
        if is_not_found(error):
            where = f" in {region}" if region else ""
            return f"not found{where}: {message} ({operation})", EXIT_AWS
        return f"{operation} failed ({code}): {message}", EXIT_AWS
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return (
            "no AWS credentials found: set AWS_PROFILE or pass --profile, or export AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY",
            EXIT_AWS,
        )
    if isinstance(error, ProfileNotFound):
        return f"{error}", EXIT_USAGE
    if isinstance(error, NoRegionError):
        return "no AWS region: pass --region or set region in the config file", EXIT_USAGE
    if isinstance(error, EndpointConnectionError | BotoConnectionError):
        return f"cannot reach the AWS endpoint: {error}; check the network, proxy and region", EXIT_AWS
    if isinstance(error, ParamValidationError):
        return f"invalid request: {error}", EXIT_USAGE
    if isinstance(error, BotoCoreError):
        return f"AWS SDK error: {error}", EXIT_AWS
    if isinstance(error, ResponseParserError):
        first = one_line(str(error))
        first = first if len(first) <= _PARSER_ERROR_CHARS else first[:_PARSER_ERROR_CHARS] + "..."
        return (
            f"the answer to an AWS request could not be read ({first}): something other than AWS answered, "
            "e.g. a proxy or firewall page; check HTTPS_PROXY, the network and the region, or retry with --debug",
            EXIT_AWS,
        )
    return f"{type(error).__name__}: {error}", EXIT_FAILED
