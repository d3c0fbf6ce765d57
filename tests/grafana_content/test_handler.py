"""The Grafana provisioner handler against a fake Grafana, fake downloads and a stubbed grafana API."""

from __future__ import annotations

import http.client
import io
import json
from typing import Any

import boto3
import pytest
import yaml
from botocore.exceptions import IncompleteReadError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from infra.constructs import grafana_content
from infra.runtime.grafana_content import handler
from tests.boundaries import refuse_all

from .fakes import (
    ACCOUNT_NAME,
    ENDPOINT,
    FILES,
    PROMETHEUS_URL,
    REGION,
    SOURCE,
    WORKSPACE,
    Context,
    FakeWeb,
    content,
    event,
    expect_alerting,
    expect_token,
    expect_token_deleted,
    grafana_client,
    workspace,
)

ALERTING_ON = json.dumps({"unifiedAlerting": {"enabled": True}})


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Fake credentials, no sleeping, and no unfaked boundary: a forgotten fake fails the test."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setattr(handler.time, "sleep", lambda seconds: None)

    refuse_all(monkeypatch, (handler, "open_url"), (handler, "aws_client"))


@pytest.fixture
def web(monkeypatch: pytest.MonkeyPatch) -> FakeWeb:
    fake = FakeWeb()
    monkeypatch.setattr(handler, "send", fake)
    return fake


@pytest.fixture
def grafana(monkeypatch: pytest.MonkeyPatch):
    client, stubber = grafana_client()
    monkeypatch.setattr(handler, "aws_client", lambda service, region: client if service == "grafana" else None)
    with stubber:
        yield stubber


def run(request_type: str = "Create", context: Context | None = None, **props: Any) -> dict[str, Any]:
    return handler.on_event(event(request_type, **props), context or Context())


def test_create_provisions_data_sources_folder_dashboards_and_rules_then_deletes_the_token(web, grafana):
    expect_alerting(grafana, "{}")
    grafana.add_response("update_workspace_configuration", {},
                         {"workspaceId": WORKSPACE, "configuration": ALERTING_ON})
    grafana.add_response("describe_workspace", workspace("10.4"), {"workspaceId": WORKSPACE})
    expect_token(grafana, existing_account=False)
    expect_token_deleted(grafana)

    result = run()

    grafana.assert_no_pending_responses()
    assert result["PhysicalResourceId"] == f"{WORKSPACE}/{ACCOUNT_NAME}"
    assert result["Data"] == {"Dashboards": "2", "AlertRules": "2", "PrometheusDataSourceType": "prometheus"}
    prometheus = web.data_sources["prometheus"]
    assert prometheus["type"] == "prometheus" and prometheus["isDefault"] is True
    assert prometheus["url"] == PROMETHEUS_URL
    assert prometheus["jsonData"]["sigV4AuthType"] == "ec2_iam_role" and prometheus["jsonData"]["sigV4Region"] == REGION
    assert web.data_sources["cloudwatch"]["type"] == "cloudwatch"
    assert web.folders == {"aws-sm-hp-observability-rules": {"uid": "aws-sm-hp-observability-rules",
                                                            "title": "Sagemaker Hyperpod Alerts"}}
    assert web.dashboards["hp-gpu"]["title"] == "GPU" and web.dashboards["hp-gpu"]["id"] is None
    assert web.dashboards["hp-wrapped"]["title"] == "Wrapped", "a {'dashboard': ...} wrapper is unwrapped"
    rule = web.rules["hp-GPUHighTemperature"]
    assert rule["ruleGroup"] == "sagemaker_hyperpod_alerts" and rule["folderUID"] == "aws-sm-hp-observability-rules"
    assert rule["for"] == "5m" and rule["labels"] == {"severity": "warning"}
    assert rule["annotations"]["description"] == "GPU {{ $labels.gpu }} is {{ $value }}°C, it's hot."
    (query,) = rule["data"]
    assert query["datasourceUid"] == "prometheus" and query["model"]["expr"] == "DCGM_FI_DEV_GPU_TEMP > 80"
    assert web.rules["hp-GPUXidError"]["for"] == "5m", "AWS's default when a rule has no 'for'"
    gpu = json.loads(FILES["dashboards/gpu.json"])
    sent = {k: v for k, v in web.dashboards["hp-gpu"].items() if k not in ("uid", "id")}
    assert sent == {k: v for k, v in gpu.items() if k not in ("uid", "id")}, "before 12: as AWS wrote them"
    assert all(h.get("X-Disable-Provenance") == "true" for (m, u), h in zip(web.calls, web.headers, strict=True)
               if "/provisioning/alert-rules" in u)


def prometheus_references(model: Any) -> list[str]:
    """The type of every data source reference and the plugin of every data source variable, in document order."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("datasource"), dict):
                found.append(node["datasource"].get("type"))
            if node.get("type") == "datasource" and "query" in node:
                found.append(f"variable:{node['query']}")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(model)
    return found


@pytest.mark.parametrize("version", ["12.4", "12", "13.0.1"])
def test_from_grafana_12_prometheus_is_the_amp_plugin_and_the_dashboards_point_at_it(web, grafana, version):
    expect_alerting(grafana, ALERTING_ON, version=version)
    expect_token(grafana, existing_account=True)
    expect_token_deleted(grafana)

    result = run()

    grafana.assert_no_pending_responses()
    assert result["Data"]["PrometheusDataSourceType"] == "grafana-amazonprometheus-datasource"
    prometheus = web.data_sources["prometheus"]
    assert prometheus["type"] == "grafana-amazonprometheus-datasource" and prometheus["uid"] == "prometheus"
    assert prometheus["url"] == PROMETHEUS_URL and prometheus["access"] == "proxy" and prometheus["isDefault"]
    assert prometheus["jsonData"] == {"sigV4Auth": True, "sigV4AuthType": "ec2_iam_role", "sigV4Region": REGION,
                                      "sigv4Service": "aps", "httpMethod": "POST"}
    assert web.data_sources["cloudwatch"]["type"] == "cloudwatch", "CloudWatch's data source is not affected"
    assert web.data_sources["cloudwatch"]["jsonData"]["authType"] == "sigv4"
    plugin = "grafana-amazonprometheus-datasource"
    assert prometheus_references(web.dashboards["hp-gpu"]) == [
        f"variable:{plugin}", "variable:cloudwatch", plugin, plugin, "cloudwatch", "datasource"]
    assert web.dashboards["hp-gpu"]["panels"][0]["targets"][0] == {
        "datasource": {"type": plugin, "uid": "${datasource}"}, "expr": "up"}, "only the type changes"
    assert web.rules["hp-GPUHighTemperature"]["data"][0]["datasourceUid"] == "prometheus"


def test_a_workspace_upgraded_to_12_gets_its_prometheus_data_source_retyped_in_place(web, grafana):
    for version in ("10.4", "12.4"):
        expect_alerting(grafana, ALERTING_ON, version=version)
        expect_token(grafana, existing_account=True)
        expect_token_deleted(grafana)
    run("Create")
    assert web.data_sources["prometheus"]["type"] == "prometheus"
    web.calls.clear()

    run("Update")

    assert ("PUT", f"https://{ENDPOINT}/api/datasources/uid/prometheus") in web.grafana_calls()
    assert web.data_sources["prometheus"]["type"] == "grafana-amazonprometheus-datasource"
    grafana.assert_no_pending_responses()


# Each at least one character, as botocore's grafana model requires (the Stubber checks answers against it).
@pytest.mark.parametrize("version", ["latest", "v12.4", "12.x", "9.4\n"])
def test_a_version_that_is_not_a_number_fails_before_grafana_is_touched(web, grafana, version):
    grafana.add_response("describe_workspace", workspace(version), {"workspaceId": WORKSPACE})
    with pytest.raises(handler.ProvisionerError, match="not a version number"):
        run()
    grafana.assert_no_pending_responses()  # no token was made
    assert web.grafana_calls() == []


def test_retargeting_copies_the_dashboard_and_leaves_the_core_type_alone():
    model = json.loads(FILES["dashboards/gpu.json"])
    before = json.dumps(model, sort_keys=True)
    retargeted = handler.retarget_prometheus(model, handler.AMP_PLUGIN_TYPE)
    assert json.dumps(model, sort_keys=True) == before, "the input is not changed"
    assert retargeted != model
    assert handler.retarget_prometheus(model, "prometheus") == model
    assert [handler.prometheus_type_for(v) for v in ("8.4", "9.4", "10.4", "11.9", "12.0", "12.4")] == \
        ["prometheus"] * 4 + ["grafana-amazonprometheus-datasource"] * 2


def test_update_reuses_the_account_and_overwrites_in_place(web, grafana):
    for _ in range(2):
        expect_alerting(grafana, ALERTING_ON)
        expect_token(grafana, existing_account=True)
        expect_token_deleted(grafana)
    run("Create")
    state = json.dumps([web.data_sources, web.folders, web.dashboards, web.rules], sort_keys=True)
    web.calls.clear()

    run("Update")

    grafana.assert_no_pending_responses()
    assert json.dumps([web.data_sources, web.folders, web.dashboards, web.rules], sort_keys=True) == state
    second = web.grafana_calls()
    assert ("POST", f"https://{ENDPOINT}/api/datasources") not in second, "existing data sources are updated"
    assert ("PUT", f"https://{ENDPOINT}/api/datasources/uid/prometheus") in second
    assert ("POST", f"https://{ENDPOINT}/api/folders") not in second
    assert ("POST", f"https://{ENDPOINT}/api/v1/provisioning/alert-rules") not in second


def test_a_file_that_does_not_match_its_digest_is_refused_before_grafana_is_touched(web, grafana):
    web.files["dashboards/wrapped.json"] = b'{"dashboard": {"title": "Tampered"}}'
    with pytest.raises(handler.ProvisionerError, match=r"dashboards/wrapped.json has sha256 .* refused"):
        run()
    assert web.grafana_calls() == []
    grafana.assert_no_pending_responses()  # no grafana API call at all: no token was made


@pytest.mark.parametrize(("call", "answer", "reason"), [
    (("POST", "/api/dashboards/db"), (500, b"internal\nerror\n  trace"), "returned HTTP 500: internal error trace"),
    (("GET", "/api/folders/aws-sm-hp-observability-rules"), (403, b'{"message":"forbidden"}'), "HTTP 403"),
])
def test_a_grafana_error_fails_with_a_one_line_reason_and_the_token_is_deleted(web, grafana, call, answer, reason):
    expect_alerting(grafana, ALERTING_ON)
    expect_token(grafana, existing_account=True)
    expect_token_deleted(grafana)
    web.fail[(call[0], f"https://{ENDPOINT}{call[1]}")] = answer
    with pytest.raises(handler.ProvisionerError) as failure:
        run()
    assert reason in str(failure.value) and "\n" not in str(failure.value)
    grafana.assert_no_pending_responses()


def test_a_data_source_name_taken_by_another_uid_is_reported(web, grafana):
    web.data_sources["manual"] = {"uid": "manual", "name": "prometheus"}
    expect_alerting(grafana, ALERTING_ON)
    expect_token(grafana, existing_account=True)
    expect_token_deleted(grafana)
    with pytest.raises(handler.ProvisionerError, match="POST /api/datasources returned HTTP 409: .*same name"):
        run()
    grafana.assert_no_pending_responses()


def test_a_grafana_call_that_times_out_fails_and_the_token_is_deleted(web, grafana):
    expect_alerting(grafana, ALERTING_ON)
    expect_token(grafana, existing_account=True)
    expect_token_deleted(grafana)
    web.fail[("GET", f"https://{ENDPOINT}/api/datasources/uid/cloudwatch")] = TimeoutError("timed out")
    with pytest.raises(handler.ProvisionerError, match="Grafana GET /api/datasources/uid/cloudwatch failed: timed out"):
        run()
    grafana.assert_no_pending_responses()


def test_no_call_starts_without_time_left(web, grafana):
    with pytest.raises(handler.ProvisionerError, match="ran out of time before downloading"):
        run(context=Context(remaining_ms=handler.DEADLINE_MARGIN_SECONDS * 1000))
    assert web.calls == []


def test_every_call_is_bounded_by_the_time_left(web, grafana, monkeypatch):
    expect_alerting(grafana, ALERTING_ON)
    expect_token(grafana, existing_account=True)
    expect_token_deleted(grafana)
    timeouts: list[float] = []

    def recording(method, url, headers, body, timeout):
        timeouts.append(timeout)
        return web(method, url, headers, body, timeout)

    monkeypatch.setattr(handler, "send", recording)
    run(context=Context(remaining_ms=(handler.DEADLINE_MARGIN_SECONDS + 12) * 1000))
    assert timeouts and max(timeouts) <= 12


def test_transient_download_errors_are_retried(web, grafana):
    expect_alerting(grafana, ALERTING_ON)
    expect_token(grafana, existing_account=True)
    expect_token_deleted(grafana)
    url = SOURCE + "dashboards/gpu.json"
    web.fail[("GET", url)] = [(503, b"busy"), TimeoutError("timed out")]
    run()
    assert web.calls.count(("GET", url)) == 3
    assert web.dashboards["hp-gpu"]["title"] == "GPU"


def test_a_missing_file_fails_without_retrying(web, grafana):
    del web.files["rules/alert-rules.yaml"]
    with pytest.raises(handler.ProvisionerError, match="alert-rules.yaml failed: 404"):
        run()
    assert web.calls.count(("GET", SOURCE + "rules/alert-rules.yaml")) == 1


def test_files_can_come_from_an_s3_copy(web, monkeypatch):
    client, stubber = grafana_client()
    s3 = boto3.client("s3", region_name=REGION)
    s3_stub = Stubber(s3)
    for path in ("dashboards/gpu.json", "dashboards/wrapped.json", "rules/alert-rules.yaml"):
        s3_stub.add_response("get_object", {"Body": StreamingBody(io.BytesIO(FILES[path]), len(FILES[path]))},
                             {"Bucket": "copy-bucket", "Key": f"hyperpod/{path}"})
    monkeypatch.setattr(handler, "aws_client", lambda service, region: {"grafana": client, "s3": s3}[service])
    expect_alerting(stubber, ALERTING_ON)
    expect_token(stubber, existing_account=True)
    expect_token_deleted(stubber)
    with stubber, s3_stub:
        run(Content=content(source="s3://copy-bucket/hyperpod/"))
        s3_stub.assert_no_pending_responses()
    assert not [u for _, u in web.calls if u.startswith(SOURCE)] and len(web.dashboards) == 2


def test_delete_removes_the_service_account_and_leaves_the_content(web, grafana):
    grafana.add_response("list_workspace_service_accounts", {"workspaceId": WORKSPACE, "serviceAccounts": [
        {"id": "7", "name": ACCOUNT_NAME, "isDisabled": "false", "grafanaRole": "ADMIN"}]}, {"workspaceId": WORKSPACE})
    grafana.add_response("delete_workspace_service_account", {"serviceAccountId": "7", "workspaceId": WORKSPACE},
                         {"workspaceId": WORKSPACE, "serviceAccountId": "7"})
    assert run("Delete") == {"PhysicalResourceId": f"{WORKSPACE}/{ACCOUNT_NAME}"}
    grafana.assert_no_pending_responses()
    assert web.calls == []


def test_delete_never_fails_when_the_workspace_is_gone(web, grafana):
    grafana.add_client_error("list_workspace_service_accounts", "ResourceNotFoundException", http_status_code=404)
    assert run("Delete") == {"PhysicalResourceId": f"{WORKSPACE}/{ACCOUNT_NAME}"}


def test_delete_of_a_resource_that_never_got_a_physical_id(web, grafana):
    created_failed = event("Delete")
    created_failed["PhysicalResourceId"] = "r-1"
    assert handler.on_event(created_failed, Context()) == {"PhysicalResourceId": "r-1"}


@pytest.mark.parametrize(("props", "message"), [
    ({"WorkspaceId": "not-a-workspace"}, "WorkspaceId"),
    ({"PrometheusUrl": PROMETHEUS_URL + "/api"}, "PrometheusUrl"),
    ({"Content": "[]"}, "Content must be a JSON object"),
    ({"Content": json.dumps({"source": "http://plain.example.com/", "dashboards": []})}, "https:// or s3://"),
    ({"Content": content().replace("dashboards/gpu.json", "../gpu.json")}, "relative path"),
])
def test_malformed_properties_are_refused(web, grafana, props, message):
    with pytest.raises(handler.ProvisionerError, match=message):
        run(**props)


def test_turning_on_alerting_keeps_other_settings_and_gives_up_on_a_failed_workspace(web, grafana):
    expect_alerting(grafana, json.dumps({"plugins": {"pluginAdminEnabled": True}}))
    grafana.add_response("update_workspace_configuration", {}, {
        "workspaceId": WORKSPACE,
        "configuration": json.dumps({"plugins": {"pluginAdminEnabled": True}, "unifiedAlerting": {"enabled": True}})})
    grafana.add_response("describe_workspace", workspace("10.4", "UPDATE_FAILED"), {"workspaceId": WORKSPACE})
    with pytest.raises(handler.ProvisionerError, match="UPDATE_FAILED after turning on alerting"):
        run()
    grafana.assert_no_pending_responses()
    assert web.grafana_calls() == []


def test_yaml_subset_reads_what_pyyaml_reads():
    text = FILES["rules/alert-rules.yaml"].decode()
    assert handler.parse_yaml_subset(text) == yaml.safe_load(text)
    nested = "a:\n  - b: 'x'\n    c:\n      - d\n      - e\n  -\n    f: g\nh: \"i\"\n"
    assert handler.parse_yaml_subset(nested) == yaml.safe_load(nested)


@pytest.mark.parametrize("text", ["a: &anchor x\n", "a: [1, 2]\n", "a: b: c\n", "a:\n\t- b\n", "a: x\na: y\n",
                                  "a: 'open\n", "  a: 1\nb: 2\n"])
def test_yaml_outside_the_subset_is_refused(text):
    with pytest.raises(handler.ProvisionerError):
        handler.parse_yaml_subset(text)


def test_the_construct_pins_every_file_by_commit_and_digest():
    manifest = json.loads(grafana_content.content_manifest(grafana_content.GITHUB_SOURCE))
    assert manifest["source"] == ("https://raw.githubusercontent.com/aws/sagemaker-hyperpod-cluster-setup/"
                                  f"{grafana_content.CONTENT_COMMIT}/{grafana_content.CONTENT_DIR}")
    assert handler.parse_content(json.dumps(manifest)) == manifest
    assert len({d["uid"] for d in manifest["dashboards"]}) == 5


def test_a_failed_token_deletion_does_not_hide_the_provisioning_error(web, grafana):
    expect_alerting(grafana, ALERTING_ON)
    expect_token(grafana, existing_account=True)
    grafana.add_client_error("delete_workspace_service_account_token", "InternalServerException", http_status_code=500)
    web.fail[("POST", f"https://{ENDPOINT}/api/dashboards/db")] = (500, b"boom")
    with pytest.raises(handler.ProvisionerError, match="HTTP 500: boom"):
        run()
    grafana.assert_no_pending_responses()


def test_redirects_are_not_followed():
    """A 3xx comes back as a status (urllib's handler would resend the Authorization header elsewhere)."""
    from email.message import Message
    from urllib.request import HTTPRedirectHandler, Request

    redirects = [h for h in handler.OPENER.handlers if isinstance(h, HTTPRedirectHandler)]
    assert [type(h) for h in redirects] == [handler.RefuseRedirects]
    assert redirects[0].redirect_request(Request("https://a.example/"), None, 302, "Found", Message(),
                                         "https://b.example/") is None


# --- answers cut short or malformed end in the one-line reason ---------------------------------------


def test_a_download_cut_short_is_retried_like_any_network_failure(web, grafana):
    expect_alerting(grafana, ALERTING_ON)
    expect_token(grafana, existing_account=True)
    expect_token_deleted(grafana)
    url = SOURCE + "dashboards/gpu.json"
    web.fail[("GET", url)] = [http.client.IncompleteRead(b"{", 99)]
    run()
    assert web.calls.count(("GET", url)) == 2
    assert web.dashboards["hp-gpu"]["title"] == "GPU"


def test_a_grafana_answer_cut_short_names_the_call(web, grafana):
    expect_alerting(grafana, ALERTING_ON)
    expect_token(grafana, existing_account=True)
    expect_token_deleted(grafana)
    web.fail[("POST", f"https://{ENDPOINT}/api/dashboards/db")] = http.client.IncompleteRead(b"", 10)
    with pytest.raises(handler.ProvisionerError, match=r"^Grafana POST /api/dashboards/db failed: IncompleteRead"):
        run()
    grafana.assert_no_pending_responses()


@pytest.mark.parametrize(("configuration", "problem"), [("{not json", "not JSON"), ("[1]", "a JSON list")])
def test_a_workspace_configuration_that_is_not_an_object_is_one_line_saying_what_to_fix(
        web, grafana, configuration, problem):
    expect_alerting(grafana, configuration)
    with pytest.raises(handler.ProvisionerError,
                       match=f"configuration of workspace {WORKSPACE} is {problem}.*update-workspace-configuration"):
        run()
    assert web.grafana_calls() == []


def test_an_s3_copy_cut_short_names_the_file(web, monkeypatch):
    s3 = boto3.client("s3", region_name=REGION)
    s3_stub = Stubber(s3)

    class CutShort(io.RawIOBase):
        def read(self, size: int = -1) -> bytes:
            raise IncompleteReadError(actual_bytes=1, expected_bytes=10)

    s3_stub.add_response("get_object", {"Body": StreamingBody(CutShort(), 10)},
                         {"Bucket": "copy-bucket", "Key": "hyperpod/dashboards/gpu.json"})
    monkeypatch.setattr(handler, "aws_client", lambda service, region: s3)
    with s3_stub, pytest.raises(handler.ProvisionerError,
                                match="download of s3://copy-bucket/hyperpod/dashboards/gpu.json failed"):
        run(Content=content(source="s3://copy-bucket/hyperpod/"))
