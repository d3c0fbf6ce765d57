"""helm on the cluster for one release: its state, recovery from a stopped run, uninstall, revision."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from . import process
from .cluster import Cluster, kubectl, write_kubeconfig
from .deadline import INSTALL_RESERVE_SECONDS, STALE_OPERATION_SECONDS, UNINSTALL_FALLBACK_RESERVE_SECONDS, Deadline
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
# How often helm history is read again while another run's operation may still be going on.
PENDING_POLL_SECONDS = 15


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
    # When the revision's operation started (None when helm printed no time).
    updated: datetime | None = None

    def age(self) -> float | None:
        """Seconds since the revision's operation started."""
        return None if self.updated is None else (datetime.now(UTC) - self.updated).total_seconds()


def parse_time(raw: object) -> datetime | None:
    """``updated`` of ``helm history --output json``: the revision's ``Info.LastDeployed``, a Go ``time.Time`` in
    JSON, so RFC 3339 with up to nine digits of fraction, left out when zero (helm/helm@05fa379 pkg/cmd/history.go:
    releaseInfo ``json:"updated,omitzero"``, getReleaseHistory). A pending revision's is when its operation began:
    install, upgrade and rollback set it as they create the pending release (pkg/action/install.go createRelease,
    upgrade.go and rollback.go, ``LastDeployed``)."""
    if not isinstance(raw, str) or not raw:
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def release_history(on: OnCluster) -> list[Revision] | None:
    """The release's revisions, oldest first, or None when it is not installed.

    ``helm history --output json`` prints a list of {revision, updated, status, chart, app_version,
    description} (helm/helm@05fa379 pkg/cmd/history.go: releaseInfo, getReleaseHistory)."""
    result = on.helm(["history", on.release.name, "--output", "json"])
    if result.returncode != 0 and RELEASE_NOT_FOUND in result.stderr:
        return None
    check(result, f"helm history {on.release.physical_id}")
    try:
        history = [Revision(int(item["revision"]), str(item["status"]), parse_time(item.get("updated")))
                   for item in json.loads(result.stdout)]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ChartInstallerError(f"helm history {on.release.physical_id} returned no list of revisions") from None
    return sorted(history, key=lambda revision: revision.number) or None


def wait_for_other_run(on: OnCluster, history: list[Revision]) -> list[Revision] | None:
    """The history once its last revision is no operation another invocation may still be running: not pending,
    or pending since longer than STALE_OPERATION_SECONDS. Waits, reading the history every PENDING_POLL_SECONDS,
    while the install keeps its reserve of this invocation's time; fails with one line when it cannot."""
    while True:
        last = history[-1]
        age = last.age()
        if last.status not in PENDING_STATUSES or age is None or age > STALE_OPERATION_SECONDS:
            return history
        where = (f"release {on.release.physical_id} is {last.status} at revision {last.number}, started "
                 f"{age:.0f} s ago")
        try:
            on.deadline.seconds_left(INSTALL_RESERVE_SECONDS + PENDING_POLL_SECONDS)
        except DeadlineExceededError:
            raise ChartInstallerError(
                f"{where}: another run of the installer may still be working on it, and this one has no time left "
                f"to wait; retry once it is {STALE_OPERATION_SECONDS} s old (helm history {on.release.name} "
                f"--namespace {on.release.namespace})") from None
        log(f"{where}: another run of the installer may still be working on it; waiting")
        time.sleep(PENDING_POLL_SECONDS)
        refreshed = release_history(on)
        if refreshed is None:
            return None
        history = refreshed


def recover(on: OnCluster, history: list[Revision] | None) -> bool:
    """Brings a release that a stopped run left mid-operation back to a state helm can upgrade. An operation
    that another invocation may still be running is waited for, never rolled back (``wait_for_other_run``).

    Returns whether the release is installed afterwards (False: the next command installs it anew)."""
    if history is None:
        return False
    history = wait_for_other_run(on, history)
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


def helm_uninstall(on: OnCluster, *, hooks: bool = True, keep: float = 0) -> subprocess.CompletedProcess[str]:
    """Without --wait: the resources are deleted in the background (helm v4's default hookOnly strategy
    waits for no deletion, helm/helm@05fa379 pkg/kube/statuswait.go hookOnlyWaiter.WaitForDelete). Without
    ``hooks``: ``--no-hooks``, "prevent hooks from running during uninstallation" (pkg/cmd/uninstall.go)."""
    return on.helm(["uninstall", on.release.name, *([] if hooks else ["--no-hooks"])], operation=True, keep=keep)


def forget_release(on: OnCluster) -> None:
    """Deletes helm's record of the release, leaving whatever objects it still has: the Secrets labelled
    owner=helm, name=<release> in its namespace (helm/helm@02ad2b1: pkg/storage/driver/secrets.go,
    newSecretsObject; the same labels in v4.1.4, helm/helm@05fa379, the helm of the kubectl v33 layer 2.2.2: its
    layer/Dockerfile has HELM_VERSION=4.1.4)."""
    forget = ["delete", "secret", "--namespace", on.release.namespace, "--selector",
              f"owner=helm,name={on.release.name}", "--ignore-not-found"]
    check(on.kubectl(forget), f"kubectl delete of the release record of {on.release.physical_id}")


def uninstall_or_forget(on: OnCluster) -> list[str]:
    """Removes the release on Delete, each step bounded, and returns what each step did.

    1. ``helm uninstall``, its hooks included, keeping UNINSTALL_FALLBACK_RESERVE_SECONDS back;
    2. when that fails (a pre-delete hook Job that cannot run once the nodes are gone is the usual cause):
       ``helm uninstall --no-hooks``;
    3. when that fails too: ``forget_release``, which leaves the release's objects to the cluster.
    Fails only when all three did, with one line listing the steps and what to do by hand."""
    name = on.release.physical_id
    steps: list[str] = []
    for hooks in (True, False):
        label = "helm uninstall" if hooks else "helm uninstall --no-hooks"
        try:
            result = helm_uninstall(on, hooks=hooks, keep=UNINSTALL_FALLBACK_RESERVE_SECONDS if hooks else 0)
        except ChartInstallerError as error:
            steps.append(f"{label}: {error}")
        else:
            if result.returncode == 0:
                return [*steps, f"{label}: done"]
            if RELEASE_NOT_FOUND in result.stderr:
                return [*steps, f"{label}: not installed"]
            steps.append(f"{label} failed (exit {result.returncode}): {tail(result.stderr) or 'no output'}")
        log(f"{name}: {steps[-1]}")
    try:
        forget_release(on)
    except ChartInstallerError as error:
        steps.append(f"deleting helm's record: {error}")
        raise ChartInstallerError(
            f"{name} was not removed: {' | '.join(steps)}. By hand: helm uninstall {on.release.name} --namespace "
            f"{on.release.namespace} --no-hooks (or kubectl delete secret --namespace {on.release.namespace} "
            f"--selector owner=helm,name={on.release.name}), then retry the deletion; or retry it keeping this "
            "resource (aws cloudformation delete-stack --retain-resources <its logical ID>)") from None
    steps.append("deleted helm's record of the release; its objects that remain are left to the cluster")
    return steps


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
