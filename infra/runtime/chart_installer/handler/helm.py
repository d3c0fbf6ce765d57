"""helm on the cluster for one release: its state, recovery from a stopped run, uninstall, revision."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import process
from .cluster import Cluster, kubectl, write_kubeconfig
from .deadline import Deadline
from .errors import ChartInstallerError, DeadlineExceededError
from .process import TERMINATE_GRACE_SECONDS, check, helm_bin, log, tail
from .properties import Release

HISTORY_MAX = 5
# Helm's driver.ErrReleaseNotFound (helm/helm@05fa379, pkg/storage/driver/driver.go, helm v4.1.4); anything
# else that merely contains "not found" is a failure.
RELEASE_NOT_FOUND = "release: not found"
# Release states, helm/helm@05fa379 pkg/release/common/status.go: Status.IsPending() and StatusUninstalling.
PENDING_STATUSES = frozenset({"pending-install", "pending-upgrade", "pending-rollback"})
UNINSTALLING = "uninstalling"
DEPLOYED = "deployed"


@dataclass(frozen=True)
class OnCluster:
    """Runs helm and kubectl for one release on one cluster, each command within the invocation's deadline."""

    release: Release
    cluster: Cluster
    workdir: Path
    env: Mapping[str, str]
    deadline: Deadline

    def helm(
        self, args: Sequence[str], *, operation: bool = False, wait: bool = False, keep: float = 0
    ) -> subprocess.CompletedProcess[str]:
        """helm with the release's namespace (without it helm looks in "default" and misses the release) and
        a kubeconfig with a fresh token. An ``operation`` (upgrade, rollback, uninstall) also gets --timeout,
        which bounds its hooks and waits, short enough that helm reports a timeout itself before the
        command's deadline; ``keep`` seconds are held back for a later step."""
        seconds = self.deadline.seconds_left(keep)
        kubeconfig = write_kubeconfig(self.workdir, self.cluster)
        flags = ["--namespace", self.release.namespace, "--kubeconfig", str(kubeconfig)]
        if operation:
            minutes = min(self.release.timeout_minutes, int((seconds - TERMINATE_GRACE_SECONDS) // 60))
            if minutes < 1:
                raise DeadlineExceededError(f"too little time is left to run helm {args[0]}")
            if minutes < self.release.timeout_minutes:
                log(f"helm timeout shortened to {minutes}m to finish within the Lambda's time limit")
            flags += (["--wait"] if wait else []) + ["--timeout", f"{minutes}m"]
        return process.run([helm_bin(), *args, *flags], self.env, seconds)

    def kubectl(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return kubectl(self.cluster, self.workdir, self.env, self.deadline, args)


@dataclass(frozen=True)
class Revision:
    number: int
    status: str


def release_history(on: OnCluster) -> list[Revision] | None:
    """The release's revisions, oldest first, or None when it is not installed.

    ``helm history --output json`` prints a list of {revision, updated, status, chart, app_version,
    description} (helm/helm@05fa379 pkg/cmd/history.go: releaseInfo, getReleaseHistory)."""
    result = on.helm(["history", on.release.name, "--output", "json"])
    if result.returncode != 0 and RELEASE_NOT_FOUND in result.stderr:
        return None
    check(result, f"helm history {on.release.physical_id}")
    try:
        history = [Revision(int(item["revision"]), str(item["status"])) for item in json.loads(result.stdout)]
    except (ValueError, KeyError, TypeError):
        raise ChartInstallerError(f"helm history {on.release.physical_id} returned no list of revisions") from None
    return sorted(history, key=lambda revision: revision.number) or None


def recover(on: OnCluster, history: list[Revision] | None) -> bool:
    """Brings a release that a stopped run left mid-operation back to a state helm can upgrade.

    Returns whether the release is installed afterwards (False: the next command installs it anew)."""
    if history is None:
        return False
    last = history[-1]
    where = f"release {on.release.physical_id} is {last.status} at revision {last.number}"
    if last.status in PENDING_STATUSES:
        deployed = [revision.number for revision in history[:-1] if revision.status == DEPLOYED]
        if deployed:
            log(f"{where}: rolling back to revision {deployed[-1]}, the last one deployed")
            rollback = ["rollback", on.release.name, str(deployed[-1]), "--history-max", str(HISTORY_MAX)]
            check(on.helm(rollback, operation=True), f"helm rollback {on.release.physical_id} {deployed[-1]}")
            return True
    elif last.status != UNINSTALLING:
        return True
    log(f"{where} and has no deployed revision to return to: uninstalling it to install it anew")
    check(helm_uninstall(on), f"helm uninstall {on.release.physical_id}")
    return False


def helm_uninstall(on: OnCluster) -> subprocess.CompletedProcess[str]:
    """Without --wait: the resources are deleted in the background (helm v4's default hookOnly strategy
    waits for no deletion, helm/helm@05fa379 pkg/kube/statuswait.go hookOnlyWaiter.WaitForDelete)."""
    return on.helm(["uninstall", on.release.name], operation=True)


def remove_failed_install(on: OnCluster, error: ChartInstallerError) -> None:
    """Uninstalls what a failed install of a new release left, or says how to do it by hand."""
    log(f"{error}; uninstalling what the install left behind")
    manual = f"remove it with: helm uninstall {on.release.name} --namespace {on.release.namespace}"
    try:
        result = helm_uninstall(on)
    except ChartInstallerError as cleanup:
        raise ChartInstallerError(f"{error}; the partial release was not removed ({cleanup}): {manual}") from None
    if result.returncode != 0 and RELEASE_NOT_FOUND not in result.stderr:
        detail = tail(result.stderr) or "no output"
        raise ChartInstallerError(f"{error}; the partial release was not removed ({detail}): {manual}")


def release_revision(on: OnCluster) -> str | None:
    """The deployed revision: ``version`` of ``helm status --output json``, the release object
    (helm/helm@05fa379 pkg/release/v1/release.go). Only informative: the release is installed by now, so
    running out of time here must not fail the request."""
    try:
        result = on.helm(["status", on.release.name, "--output", "json"])
    except DeadlineExceededError as error:
        log(f"the revision of {on.release.physical_id} was not read: {error}")
        return None
    if result.returncode != 0:
        log(f"could not read the revision of {on.release.physical_id}: {tail(result.stderr)}")
        return None
    try:
        return str(json.loads(result.stdout)["version"])
    except (ValueError, KeyError, TypeError):
        log(f"helm status of {on.release.physical_id} returned no version")
        return None
