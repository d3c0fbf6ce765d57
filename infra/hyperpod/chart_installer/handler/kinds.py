"""Waiting, within limits, for the API server to serve the kinds a release's objects are of.

A chart of custom objects (the Karpenter node pools) can only be installed once the CRDs that define their kinds
exist, and another party installs those (HyperPod, once the cluster's autoscaling is on). The API server lists
what a group/version serves at ``/apis/<group>/<version>`` (an APIResourceList whose ``resources`` carry each
``kind``; https://kubernetes.io/docs/reference/using-api/api-concepts/), answering 404 until the group exists.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from .deadline import CLEANUP_RESERVE_SECONDS
from .errors import ChartInstallerError
from .helm import OnCluster
from .process import log, tail

# How long the kinds may take to appear, and how often the API server is asked.
KINDS_WAIT_SECONDS = 8 * 60
KINDS_POLL_SECONDS = 15
# Kept back for the install itself (and its cleanup) after the kinds appear.
INSTALL_RESERVE_SECONDS = 3 * 60 + CLEANUP_RESERVE_SECONDS


def served_kinds(on: OnCluster, group_version: str) -> set[str]:
    """The kinds the API server serves under ``group_version``; empty while it serves none (404)."""
    result = on.kubectl(["get", "--raw", f"/apis/{group_version}"])
    if result.returncode != 0:
        log(f"/apis/{group_version} is not served yet: {tail(result.stderr)}")
        return set()
    try:
        listed = json.loads(result.stdout)
    except ValueError:
        raise ChartInstallerError(f"/apis/{group_version} answered something that is not JSON: "
                                  f"{tail(result.stdout)}") from None
    return {str(r.get("kind")) for r in listed.get("resources", []) if isinstance(r, dict)}


def wait_for_kinds(on: OnCluster, kinds: Sequence[tuple[str, str]]) -> None:
    """Return once every (group/version, kind) is served; fail after KINDS_WAIT_SECONDS or when the install
    would no longer have its reserve of the invocation's time."""
    started = time.monotonic()
    missing = list(kinds)
    while True:
        missing = [(gv, kind) for gv, kind in missing if kind not in served_kinds(on, gv)]
        if not missing:
            log(f"served: {', '.join(f'{gv}/{kind}' for gv, kind in kinds)}")
            return
        waited = time.monotonic() - started
        left = on.deadline.seconds_left(INSTALL_RESERVE_SECONDS)  # raises when the install's reserve is reached
        if waited + KINDS_POLL_SECONDS > KINDS_WAIT_SECONDS or left < KINDS_POLL_SECONDS:
            names = ", ".join(f"{gv}/{kind}" for gv, kind in missing)
            raise ChartInstallerError(f"the cluster does not serve {names} after {waited:.0f} s; the release "
                                      f"{on.release.physical_id} needs them (nothing was installed)")
        time.sleep(KINDS_POLL_SECONDS)
