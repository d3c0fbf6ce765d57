"""Waiting, within limits, for the API server to serve the kinds a release's objects are of.

A chart of custom objects (the Karpenter node pools) can only be installed once the CRDs that define their kinds
exist, and another party installs those (HyperPod, once the cluster's autoscaling is on). The API server lists
what a group/version serves at ``/apis/<group>/<version>``: an APIResourceList, "the resources supported in a
specific group and version", each with its ``kind`` (the Kubernetes OpenAPI type as generated in
kubernetes-client/javascript@8151bff:src/gen/model/v1APIResourceList.ts; client-go's discovery reads it with
ServerResourcesForGroupVersion). A group/version nobody serves answers 404 (not read in the API server's source
here; the tests fake it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from .cluster import REQUEST_TIMEOUT, json_answer
from .deadline import INSTALL_RESERVE_SECONDS
from .errors import ChartInstallerError, DeadlineExceededError
from .helm import OnCluster
from .process import log

# How long the kinds may take to appear, and how often the API server is asked.
KINDS_WAIT_SECONDS = 8 * 60
KINDS_POLL_SECONDS = 15




def served_kinds(on: OnCluster, group_version: str) -> set[str]:
    """The kinds the API server serves under ``group_version``; empty while it serves none (404)."""
    listed = json_answer(on.kubectl(["get", "--raw", f"/apis/{group_version}", REQUEST_TIMEOUT]),
                         f"get --raw /apis/{group_version}", expected="APIResourceList")
    if listed is None:
        log(f"/apis/{group_version} is not served yet")
        return set()
    return {str(r.get("kind")) for r in listed.get("resources", []) if isinstance(r, dict)}


def missing_kinds(on: OnCluster, kinds: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (group/version, kind) pairs of ``kinds`` the API server does not serve now."""
    return [(gv, kind) for gv, kind in kinds if kind not in served_kinds(on, gv)]


def _names(kinds: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{gv}/{kind}" for gv, kind in kinds)


def wait_for_kinds(on: OnCluster, kinds: Sequence[tuple[str, str]]) -> None:
    """Return once every (group/version, kind) is served; fail after KINDS_WAIT_SECONDS or when the install
    would no longer have its reserve of the invocation's time."""
    started = time.monotonic()
    missing = list(kinds)
    while True:
        missing = missing_kinds(on, missing)
        if not missing:
            log(f"served: {_names(kinds)}")
            return
        waited = time.monotonic() - started
        try:
            on.deadline.seconds_left(INSTALL_RESERVE_SECONDS + KINDS_POLL_SECONDS)
        except DeadlineExceededError:
            waited = KINDS_WAIT_SECONDS  # no time for another round: report as a timeout
        if waited + KINDS_POLL_SECONDS > KINDS_WAIT_SECONDS:
            raise ChartInstallerError(f"the cluster does not serve {_names(missing)} after "
                                      f"{time.monotonic() - started:.0f} s; the release {on.release.physical_id} "
                                      "needs them (nothing was installed)")
        time.sleep(KINDS_POLL_SECONDS)
