"""`hpctl wait`: poll DescribeCluster until the cluster (its status, its nodes, or a software update) is done."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from hpctl import cluster as api
from hpctl.errors import EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT
from hpctl.output import is_terminal

SUCCESS = {"InService"}
FAILURE = {"Failed", "Deleting"}  # Deleting never comes back to InService
# SoftwareUpdateStatus of an instance group (botocore's SageMaker model): Pending -> InProgress -> Succeeded, or
# -> RollbackInProgress -> RollbackComplete, or Failed.
UPDATE_SUCCESS = {"Succeeded"}
UPDATE_FAILURE = {"Failed", "RollbackComplete"}
MIN_INTERVAL = 5.0  # seconds: DescribeCluster more often than this only spends the API rate limit


def _sleep(seconds: float) -> None:  # replaced in tests
    time.sleep(seconds)


def _now() -> float:  # replaced in tests
    return time.monotonic()


@dataclass
class WaitResult:
    status: str
    exit_code: int
    elapsed: float
    failure_message: str | None = None


# A check looks at one DescribeCluster answer: None to keep waiting, else (exit code, failure message).
Check = Callable[[dict[str, Any]], tuple[int, str | None] | None]


def _cluster_failed(desc: dict[str, Any]) -> tuple[int, str | None] | None:
    if desc.get("ClusterStatus") in FAILURE:
        return EXIT_FAILED, desc.get("FailureMessage") or None
    return None


def cluster_in_service(desc: dict[str, Any]) -> tuple[int, str | None] | None:
    """InService (0) or Failed/Deleting (1)."""
    if desc.get("ClusterStatus") in SUCCESS:
        return EXIT_OK, None
    return _cluster_failed(desc)


def nodes_at_target(desc: dict[str, Any]) -> tuple[int, str | None] | None:
    """InService and every group's current count at its target: with continuous provisioning a cluster is
    InService while its groups are still filling up."""
    failed = _cluster_failed(desc)
    if failed:
        return failed
    groups = desc.get("InstanceGroups", [])
    full = all(g.get("CurrentCount", 0) >= g.get("TargetCount", 0) for g in groups)
    return (EXIT_OK, None) if desc.get("ClusterStatus") in SUCCESS and full else None


def software_updated(groups: Sequence[str]) -> Check:
    """Every named group (all when empty) reports its last software update Succeeded (0), Failed or rolled back (1)."""

    def check(desc: dict[str, Any]) -> tuple[int, str | None] | None:
        failed = _cluster_failed(desc)
        if failed:
            return failed
        picked = [g for g in desc.get("InstanceGroups", []) if not groups or g.get("InstanceGroupName") in groups]
        states = {g.get("InstanceGroupName"): g.get("SoftwareUpdateStatus") for g in picked}
        bad = [f"{name}: {state}" for name, state in states.items() if state in UPDATE_FAILURE]
        if bad:
            return EXIT_FAILED, "software update " + ", ".join(bad)
        if all(state in UPDATE_SUCCESS for state in states.values()):
            return EXIT_OK, None
        return None

    return check


def _progress_line(desc: dict[str, Any], elapsed: float) -> str:
    groups = " ".join(
        f"{g.get('InstanceGroupName')}={g.get('CurrentCount', 0)}/{g.get('TargetCount', 0)}"
        + (f"({g['SoftwareUpdateStatus']})" if g.get("SoftwareUpdateStatus") else "")
        for g in desc.get("InstanceGroups", [])
    )
    minutes, seconds = divmod(int(elapsed), 60)
    return f"[{minutes:3d}m{seconds:02d}s] {desc.get('ClusterStatus')}  {groups}"


def wait_for_cluster(
    sagemaker: Any,
    name: str,
    *,
    timeout: float,
    interval: float,
    check: Check = cluster_in_service,
    stream: TextIO | None = None,
) -> WaitResult:
    """Poll until `check` says done (its exit code) or time runs out (exit 4).

    On a terminal the progress line is redrawn in place; otherwise a line is written when it changes.
    """
    stream = stream or sys.stderr
    tty = is_terminal(stream)
    start = _now()
    last_line = ""
    while True:
        desc = api.describe_cluster(sagemaker, name)
        elapsed = _now() - start
        status = desc.get("ClusterStatus", "Unknown")
        line = _progress_line(desc, elapsed)
        if tty:
            stream.write("\r\033[K" + line)
            stream.flush()
        elif line.split("]", 1)[1] != last_line.split("]", 1)[-1]:
            stream.write(line + "\n")
        last_line = line
        outcome = check(desc)
        if outcome is not None:
            if tty:
                stream.write("\n")
            return WaitResult(status, outcome[0], elapsed, outcome[1])
        if elapsed + interval > timeout:
            if tty:
                stream.write("\n")
            return WaitResult(status, EXIT_TIMEOUT, elapsed)
        _sleep(interval)
