"""`hpctl wait`: poll DescribeCluster until the cluster is InService or has failed, or time runs out."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from hpctl import cluster as api
from hpctl.errors import EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT
from hpctl.output import is_terminal

SUCCESS = {"InService"}
FAILURE = {"Failed", "Deleting"}  # Deleting never comes back to InService


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


def _progress_line(desc: dict[str, Any], elapsed: float) -> str:
    groups = " ".join(
        f"{g.get('InstanceGroupName')}={g.get('CurrentCount', 0)}/{g.get('TargetCount', 0)}"
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
    stream: TextIO | None = None,
    on_poll: Callable[[dict[str, Any]], None] | None = None,
) -> WaitResult:
    """Poll until InService (exit 0), Failed/Deleting (exit 1) or timeout (exit 4).

    On a terminal the progress line is redrawn in place; otherwise a line is written when it changes.
    """
    stream = stream or sys.stderr
    tty = is_terminal(stream)
    start = _now()
    last_line = ""
    while True:
        desc = api.describe_cluster(sagemaker, name)
        if on_poll:
            on_poll(desc)
        elapsed = _now() - start
        status = desc.get("ClusterStatus", "Unknown")
        line = _progress_line(desc, elapsed)
        if tty:
            stream.write("\r\033[K" + line)
            stream.flush()
        elif line.split("]", 1)[1] != last_line.split("]", 1)[-1]:
            stream.write(line + "\n")
        last_line = line
        if status in SUCCESS or status in FAILURE:
            if tty:
                stream.write("\n")
            code = EXIT_OK if status in SUCCESS else EXIT_FAILED
            return WaitResult(status, code, elapsed, desc.get("FailureMessage") or None)
        if elapsed + interval > timeout:
            if tty:
                stream.write("\n")
            return WaitResult(status, EXIT_TIMEOUT, elapsed)
        _sleep(interval)
