"""Lambda onEvent handler that takes the Grafana ``ADMIN`` role back from users and groups removed from a workspace's
admin lists (``observability.grafana.admin_user_ids`` and ``admin_group_ids``).

The lists are granted by ``ManagedGrafana``'s ``Admins`` resource, aws-cdk-lib's ``AwsCustomResource``: it calls
``UpdatePermissions`` ADD with the whole list on Create and Update and REVOKE with the whole list on Delete. It
never sees the list it replaces, so an Update that drops someone left them admin. This resource
(``Custom::HyperPodGrafanaAdminRevocation``) gets both lists on Update (CloudFormation's ``OldResourceProperties``)
and revokes the difference. It does nothing on Create and Delete: what there is to grant or take back then is the
whole list, which ``Admins`` handles. ``Admins`` is kept rather than replaced by this function, because
replacing it would delete it, and its Delete revokes the whole list after the new resource granted it.

ResourceProperties (strings): ``WorkspaceId``, ``Region``, ``AdminUserIds`` and ``AdminGroupIds`` (JSON lists of
IAM Identity Center user and group IDs). The physical id is ``<workspace id>/admin-revocation``.

``UpdatePermissions`` answers 200 with a list of ``errors`` (``UpdatePermissionsResponse.errors``, botocore's
grafana model): any error there fails the Update with one line naming who keeps the role and how to revoke it by
hand, as does an error of the call itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..common.errors import DeployError, one_line, reports_failures
from .handler import REGION, WORKSPACE_ID, aws_client, log, required

ROLE = "ADMIN"
# UserType of botocore's grafana model: an Identity Center user or group.
KINDS = (("AdminUserIds", "SSO_USER"), ("AdminGroupIds", "SSO_GROUP"))


@reports_failures
def on_event(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    request_type = event.get("RequestType")
    props = event.get("ResourceProperties") or {}
    log(f"{request_type} request {event.get('RequestId', '')} for {event.get('LogicalResourceId', '')}")
    workspace_id = required(props, "WorkspaceId", WORKSPACE_ID)
    physical_id = f"{workspace_id}/admin-revocation"
    if request_type in ("Create", "Delete"):
        return {"PhysicalResourceId": str(event.get("PhysicalResourceId") or physical_id)}
    if request_type != "Update":
        raise DeployError(f"unknown RequestType {request_type!r}")
    old = event.get("OldResourceProperties") or {}
    if old.get("WorkspaceId") != workspace_id:
        # A new workspace: the old one goes with its permissions, and Admins grants the new one.
        log(f"workspace changed from {old.get('WorkspaceId')!r} to {workspace_id}: nothing to revoke")
        return {"PhysicalResourceId": physical_id, "Data": {"Revoked": "0"}}
    removed = removed_principals(old, props)
    if removed:
        revoke(workspace_id, required(props, "Region", REGION), removed)
    else:
        log("no admin was removed")
    return {"PhysicalResourceId": physical_id, "Data": {"Revoked": str(len(removed))}}


def principals(props: Mapping[str, Any]) -> list[dict[str, str]]:
    """The users and groups of ``props`` as UpdatePermissions' ``User`` structures (``id``, ``type``)."""
    found = []
    for name, kind in KINDS:
        raw = props.get(name) or "[]"
        try:
            ids = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            ids = None
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            raise DeployError(f"property {name} must be a JSON list of Identity Center IDs")
        found += [{"id": i, "type": kind} for i in ids]
    return found


def removed_principals(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, str]]:
    """The users and groups of the old lists that the new lists no longer hold, in their old order."""
    kept = {(p["id"], p["type"]) for p in principals(new)}
    return [p for p in principals(old) if (p["id"], p["type"]) not in kept]


def revoke(workspace_id: str, region: str, users: list[dict[str, str]]) -> None:
    names = ", ".join(f"{u['type']} {u['id']}" for u in users)
    by_hand = (f"revoke it by hand: aws grafana update-permissions --workspace-id {workspace_id} "
               f"--update-instruction-batch with action REVOKE, role {ROLE}")
    log(f"revoking {ROLE} of {names} in {workspace_id}")
    try:
        answer = aws_client("grafana", region).update_permissions(
            workspaceId=workspace_id,
            updateInstructionBatch=[{"action": "REVOKE", "role": ROLE, "users": users}],
        )
    except Exception as error:
        raise DeployError(f"{names} keep {ROLE} in {workspace_id}: UpdatePermissions failed "
                          f"({type(error).__name__}: {one_line(str(error), 300)}); {by_hand}") from error
    errors = answer.get("errors") or []
    if errors:
        failed = "; ".join(f"{', '.join(u.get('id', '?') for u in e.get('causedBy', {}).get('users', []))}: "
                           f"{e.get('code')} {e.get('message')}" for e in errors)
        raise DeployError(f"{ROLE} was not revoked in {workspace_id} for {failed}; {by_hand}")
    log(f"revoked {ROLE} of {names}")
