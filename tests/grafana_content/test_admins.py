"""Grafana admins removed from the config lose the role: the update path of the revocation handler, against the
grafana API stubbed with botocore's Stubber (shapes from botocore's grafana model)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber

from infra.runtime.common.errors import DeployError
from infra.runtime.grafana_content import admins

from .fakes import REGION, WORKSPACE, grafana_client

ALICE = "9067c7ea2d-11111111-2222-3333-4444-555555555555"
BOB = "9067c7ea2d-66666666-7777-8888-9999-000000000000"
OPS = "9067c7ea2d-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
PHYSICAL_ID = f"{WORKSPACE}/admin-revocation"


@pytest.fixture
def grafana(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    client, stubber = grafana_client()
    monkeypatch.setattr(admins, "aws_client", lambda service, region: client)
    with stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def props(users: list[str], groups: list[str], workspace: str = WORKSPACE) -> dict[str, Any]:
    return {"ServiceToken": "arn:aws:lambda:us-west-2:111122223333:function:x", "WorkspaceId": workspace,
            "Region": REGION, "AdminUserIds": json.dumps(users), "AdminGroupIds": json.dumps(groups)}


def update(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return admins.on_event({"RequestType": "Update", "RequestId": "r-1", "LogicalResourceId": "AdminRevocation",
                            "PhysicalResourceId": PHYSICAL_ID, "ResourceProperties": new,
                            "OldResourceProperties": old}, None)


def expect_revoke(stubber: Stubber, users: list[dict[str, str]], errors: list[dict[str, Any]] | None = None) -> None:
    stubber.add_response(
        "update_permissions", {"errors": errors or []},
        {"workspaceId": WORKSPACE, "updateInstructionBatch": [{"action": "REVOKE", "role": "ADMIN", "users": users}]})


def test_an_update_revokes_exactly_the_users_and_groups_removed(grafana: Stubber) -> None:
    expect_revoke(grafana, [{"id": BOB, "type": "SSO_USER"}, {"id": OPS, "type": "SSO_GROUP"}])

    result = update(props([ALICE, BOB], [OPS]), props([ALICE], []))

    assert result == {"PhysicalResourceId": PHYSICAL_ID, "Data": {"Revoked": "2"}}


@pytest.mark.parametrize(("old", "new"), [
    (props([ALICE], []), props([ALICE], [])),
    (props([ALICE], []), props([ALICE, BOB], [OPS])),
])
def test_an_update_that_removes_nobody_calls_nothing(grafana: Stubber, old: dict[str, Any],
                                                       new: dict[str, Any]) -> None:
    assert update(old, new)["Data"] == {"Revoked": "0"}


def test_a_new_workspace_has_nothing_to_revoke(grafana: Stubber) -> None:
    assert update(props([ALICE], [], "g-aaaaaaaaaa"), props([], [OPS]))["Data"] == {"Revoked": "0"}


@pytest.mark.parametrize("request_type", ["Create", "Delete"])
def test_create_and_delete_leave_the_whole_list_to_the_grant(grafana: Stubber, request_type: str) -> None:
    event = {"RequestType": request_type, "ResourceProperties": props([ALICE], [OPS])}
    assert admins.on_event(event, None) == {"PhysicalResourceId": PHYSICAL_ID}


def test_errors_in_the_answer_fail_the_update_with_one_line_saying_what_to_do(grafana: Stubber) -> None:
    caused_by = {"action": "REVOKE", "role": "ADMIN", "users": [{"id": BOB, "type": "SSO_USER"}]}
    expect_revoke(grafana, [{"id": BOB, "type": "SSO_USER"}],
                  [{"code": 404, "message": "user not found\nin the directory", "causedBy": caused_by}])

    with pytest.raises(DeployError) as raised:
        update(props([ALICE, BOB], []), props([ALICE], []))

    message = str(raised.value)
    assert "\n" not in message
    assert BOB in message and "404" in message and "aws grafana update-permissions" in message


def test_access_denied_fails_the_update_with_one_line(grafana: Stubber) -> None:
    grafana.add_client_error("update_permissions", service_error_code="AccessDeniedException",
                             service_message="User is not authorized", http_status_code=403)

    with pytest.raises(DeployError, match=f"SSO_USER {BOB} keep ADMIN in {WORKSPACE}.*AccessDenied.*by hand"):
        update(props([BOB], []), props([], [OPS]))


def test_malformed_lists_are_refused_before_any_call(grafana: Stubber) -> None:
    with pytest.raises(DeployError, match="AdminUserIds must be a JSON list"):
        update(props([ALICE], []), {**props([], []), "AdminUserIds": "{not json"})
