"""The custom resource protocol: Create and Update install or upgrade the release, Delete uninstalls it."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...common.errors import one_line, reports_failures
from .charts import fetch_chart
from .cluster import describe_cluster
from .crds import apply_crds
from .deadline import CLEANUP_RESERVE_SECONDS, Deadline, lambda_deadline
from .errors import ChartInstallerError, ClusterNotFoundError
from .helm import (
    HISTORY_MAX,
    OnCluster,
    forget_release,
    recover,
    release_history,
    release_revision,
    remove_failed_install,
    uninstall_or_forget,
)
from .kinds import missing_kinds, wait_for_kinds
from .process import check, helm_env, log, tail
from .properties import check_allowed_source, parse_release, parse_source, parse_values, release_to_delete


@reports_failures
def on_event(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    request_type = event.get("RequestType")
    props = event.get("ResourceProperties") or {}
    log(f"{request_type} request {event.get('RequestId', '')} for {event.get('LogicalResourceId', '')}")
    deadline = lambda_deadline(context)
    if request_type in ("Create", "Update"):
        return install(props, previous_physical_id=event.get("PhysicalResourceId"), deadline=deadline)
    if request_type == "Delete":
        return uninstall(props, physical_id=str(event.get("PhysicalResourceId", "")), deadline=deadline)
    raise ChartInstallerError(f"unknown RequestType {request_type!r}")


def install(props: Mapping[str, Any], *, previous_physical_id: str | None, deadline: Deadline) -> dict[str, Any]:
    release = parse_release(props)
    source = parse_source(props)
    check_allowed_source(props, os.environ)
    values = parse_values(props.get("Values"), release.region)
    cluster = describe_cluster(release.cluster_name, release.region)
    if previous_physical_id and previous_physical_id != release.physical_id:
        log(
            f"release moves from {previous_physical_id} to {release.physical_id}; "
            "CloudFormation deletes the old one after this update"
        )
    with tempfile.TemporaryDirectory(prefix="chart-installer-") as tmp:
        workdir = Path(tmp)
        env = helm_env(workdir)
        chart_dir = fetch_chart(source, workdir, release.region, env, deadline)
        values_file = workdir / "values.json"
        values_file.write_text(json.dumps(values, indent=2))
        on = OnCluster(release, cluster, workdir, env, deadline)
        if release.required_kinds:
            wait_for_kinds(on, release.required_kinds)
        installed = recover(on, release_history(on))
        if installed:
            apply_crds(on, chart_dir, values_file)
        upgrade = ["upgrade", "--install", release.name, str(chart_dir), "--create-namespace"]
        upgrade += ["--values", str(values_file), "--history-max", str(HISTORY_MAX)]
        # A new release keeps time back to be uninstalled again if its install fails.
        keep = 0 if installed else CLEANUP_RESERVE_SECONDS
        try:
            result = on.helm(upgrade, operation=True, wait=release.wait, keep=keep)
            check(result, f"helm upgrade --install {release.physical_id}")
        except ChartInstallerError as error:
            if not installed:
                remove_failed_install(on, error)
            raise
        log(tail(result.stdout))
        revision = release_revision(on)
    data = {"Release": release.name, "Namespace": release.namespace}
    if revision is not None:
        data["Revision"] = revision
    return {"PhysicalResourceId": release.physical_id, "Data": data}


def uninstall(props: Mapping[str, Any], *, physical_id: str, deadline: Deadline) -> dict[str, Any]:
    release = release_to_delete(props, physical_id)
    deadline.seconds_left()  # fail before any call when the time is already up
    try:
        cluster = describe_cluster(release.cluster_name, release.region)
    except ClusterNotFoundError:
        log(f"cluster {release.cluster_name} no longer exists: nothing left to uninstall")
        return {"PhysicalResourceId": physical_id}
    with tempfile.TemporaryDirectory(prefix="chart-installer-") as tmp:
        workdir = Path(tmp)
        on = OnCluster(release, cluster, workdir, helm_env(workdir), deadline)
        gone = missing_kinds(on, release.required_kinds) if release.required_kinds else []
        if gone:
            # The CRDs of the release's kinds are gone, and their objects with them; helm uninstall would fail to
            # build those objects and leave the release "uninstalling" on every retry. Only helm's record of the
            # release is left.
            log(f"{', '.join(f'{gv}/{kind}' for gv, kind in gone)} no longer served: deleting the record of "
                f"{release.physical_id} instead of uninstalling it")
            forget_release(on)
            return {"PhysicalResourceId": physical_id}
        steps = uninstall_or_forget(on)
    # CloudFormation shows no reason for a success (the provider framework answers SUCCESS with the reason
    # "SUCCESS"): the steps are in the log and in the response's Data.
    log(f"{release.physical_id}: {' | '.join(steps)}")
    return {"PhysicalResourceId": physical_id, "Data": {"Uninstall": one_line(" | ".join(steps))}}
