"""Lambda onEvent handler that provisions HyperPod's Grafana content into an Amazon Managed Grafana workspace.

Wired as the ``on_event`` function of a CDK ``custom_resources.Provider``: it returns ``PhysicalResourceId`` /
``Data`` on success and raises on failure, so the framework reports FAILED with the exception's one-line
message. The physical id is ``<workspace id>/<service account name>``.

What it provisions is what AWS's own setups provision (aws/sagemaker-hyperpod-cluster-setup@b920fcf4:
eks/cloudformation/resources/grafana-lambda-function/lambda_function/lambda_function.py, and
awslabs/awsome-distributed-training@0edaf152: .../terraform-modules/hyperpod-eks-tf/modules/observability/
grafana_workspace.tf): a ``cloudwatch`` and a ``prometheus`` data source (SigV4 with the workspace role), the
folder "Sagemaker Hyperpod Alerts", AWS's dashboards with fixed UIDs, and AWS's alert rules. Both setups predate
Amazon Managed Grafana 12, which serves Amazon Managed Service for Prometheus through a plugin of its own: on a
workspace of version 12 or later the ``prometheus`` data source is of that plugin's type and the dashboards are
pointed at it (prometheus_type_for, retarget_prometheus). The HyperPod
observability add-on only receives the Grafana workspace's name and ARN; neither setup gives it any
``grafana:`` permission, and both create this content themselves.

ResourceProperties (strings): ``WorkspaceId``, ``WorkspaceEndpoint`` (host name), ``Region``,
``PrometheusUrl`` (``https://aps-workspaces.<region>.<url suffix>/workspaces/<id>``), ``ServiceAccountName``
and ``Content``, a JSON object::

    {"source": "https://<base>/" | "s3://<bucket>/<prefix>/",
     "dashboards": [{"uid": "...", "path": "<relative path>", "sha256": "<hex>"}, ...],
     "alertRules": {"path": "<relative path>", "sha256": "<hex>"}}

Every file is read from ``source`` + path and refused unless its SHA-256 matches before anything in Grafana
is touched. An https source needs internet egress (this function runs outside any VPC); an s3 source suits
closed networks.

Create/Update: enable Grafana alerting in the workspace configuration if it is off, reuse (or create) one
ADMIN service account, create a token that outlives the invocation by little, upsert everything by fixed
UID (overwrite), and delete the token in all cases. Delete: remove the service account and leave the
content with the workspace, which its own removal policy deletes or retains; a failure is logged, never
reported, so content can never block a stack deletion.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlparse
from urllib.request import HTTPRedirectHandler, Request, build_opener

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ..common.deadline import Deadline
from ..common.errors import DeployError, one_line, reports_failures

# Data source and folder UIDs and the rule conversion follow AWS's Lambda (lambda_function.py at
# aws/sagemaker-hyperpod-cluster-setup@b920fcf4, path above): the dashboards' panels and the alert rules
# refer to these UIDs.
PROMETHEUS_UID = "prometheus"
CLOUDWATCH_UID = "cloudwatch"
ALERTS_FOLDER_UID = "aws-sm-hp-observability-rules"
ALERTS_FOLDER_TITLE = "Sagemaker Hyperpod Alerts"
RULE_UID_PREFIX = "hp-"
# Grafana UIDs: at most 40 letters, digits, '-' or '_'.
GRAFANA_UID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
WORKSPACE_ID = re.compile(r"^g-[0-9a-f]{10}$")  # botocore grafana model, shape WorkspaceId
# The workspace's URL without /api: Grafana's Prometheus data source appends /api/v1/... itself (AWS's
# Terraform module sets the same URL; AWS's Lambda appends /api, which would double it).
PROMETHEUS_URL = re.compile(r"^https://aps-workspaces\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/workspaces/ws-[0-9a-f-]+$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
HOST = re.compile(r"^[A-Za-z0-9.-]+$")
# Amazon Managed Grafana 12 serves Amazon Managed Service for Prometheus through its own plugin: "Starting in
# Amazon Managed Grafana version 12, SigV4 authentication support in the Core Prometheus plugin has been removed"
# (https://docs.aws.amazon.com/grafana/latest/userguide/prometheus-manually-adding.html, read as
# c2hans/aws-docs@8aa2af74: docs/grafana/latest/userguide/prometheus-manually-adding.md), and the plugin "is
# available starting in Amazon Managed Grafana version 12" (amazon-prometheus-data-source.md, c2hans/aws-docs@63cf41d6).
# A workspace created without a version gets the latest ("If not specified, defaults to the latest version":
# botocore 1.44.8, grafana CreateWorkspaceRequest.grafanaVersion), so a new workspace is on 12 or later.
AMP_PLUGIN_MAJOR = 12
# The plugin's type id: grafana/grafana-amazonprometheus-datasource@7abea3cb: src/plugin.json "id".
AMP_PLUGIN_TYPE = "grafana-amazonprometheus-datasource"
CORE_PROMETHEUS_TYPE = "prometheus"
# WorkspaceDescription.grafanaVersion (botocore grafana model, required), e.g. "10.4".
GRAFANA_VERSION = re.compile(r"(\d+)(\.\d+)*")

# The Lambda runs 5 minutes at most (GrafanaContent's FUNCTION_TIMEOUT_MINUTES); every network call ends before
# it does, leaving time to report.
FUNCTION_TIMEOUT_SECONDS = 5 * 60
DEADLINE_MARGIN_SECONDS = 20
HTTP_TIMEOUT_SECONDS = 30
DOWNLOAD_ATTEMPTS = 3
TRANSIENT_HTTP_CODES = frozenset({408, 429, 500, 502, 503, 504})
MAX_FILE_BYTES = 8 * 1024 * 1024
# The token lives a little longer than the invocation can; it is deleted when the work is done anyway.
# CreateWorkspaceServiceAccountToken accepts 1..2592000 seconds (botocore grafana model).
TOKEN_SLACK_SECONDS = 60
WORKSPACE_POLL_SECONDS = 10
# A Grafana error body is quoted up to this many bytes in a failure.
REASON_CHARS = 300

# The provisioner's failures are the runtime's one kind of failure (one line, common.errors).
ProvisionerError = DeployError
# A request that got no complete answer: no connection, a timeout, or a body cut short (http.client raises
# IncompleteRead, an HTTPException, when the connection closes before Content-Length bytes arrived).
NETWORK_ERRORS = (URLError, TimeoutError, ConnectionError, HTTPException)


# --- time ----------------------------------------------------------------------------------------


def call_timeout(deadline: Deadline, what: str) -> float:
    """A timeout for one call that ends before the deadline; refuses to start a call with no time left."""
    return min(HTTP_TIMEOUT_SECONDS, deadline.seconds_left(before=what))


# --- entry point ---------------------------------------------------------------------------------


@reports_failures
def on_event(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Any failure of Create or Update is reported with one line (``reports_failures``): ours as written, an AWS
    call's as its botocore error."""
    request_type = event.get("RequestType")
    props = event.get("ResourceProperties") or {}
    log(f"{request_type} request {event.get('RequestId', '')} for {event.get('LogicalResourceId', '')}")
    deadline = Deadline.of(context, fallback_seconds=FUNCTION_TIMEOUT_SECONDS, margin=DEADLINE_MARGIN_SECONDS)
    if request_type == "Delete":
        return delete(props, str(event.get("PhysicalResourceId", "")))
    if request_type in ("Create", "Update"):
        return provision(props, deadline)
    raise ProvisionerError(f"unknown RequestType {request_type!r}")


@dataclass(frozen=True)
class Target:
    workspace_id: str
    endpoint: str
    region: str
    prometheus_url: str
    service_account: str

    @property
    def physical_id(self) -> str:
        return f"{self.workspace_id}/{self.service_account}"


@dataclass(frozen=True)
class Dashboard:
    uid: str
    model: dict[str, Any]


def provision(props: Mapping[str, Any], deadline: Deadline) -> dict[str, Any]:
    target = parse_target(props)
    content = parse_content(props.get("Content"))
    # All content is read and verified before the workspace is touched: a bad pin changes nothing.
    files = {entry["path"]: fetch(content["source"], entry, target.region, deadline)
             for entry in [*content["dashboards"], content["alertRules"]]}
    dashboards = [Dashboard(entry["uid"], dashboard_model(entry["path"], files[entry["path"]]))
                  for entry in content["dashboards"]]
    rules = alert_rules(files[content["alertRules"]["path"]])
    grafana = aws_client("grafana", target.region)
    prometheus_type = prometheus_type_for(grafana_version(grafana, target.workspace_id))
    dashboards = [Dashboard(d.uid, retarget_prometheus(d.model, prometheus_type)) for d in dashboards]
    enable_alerting(grafana, target.workspace_id, deadline)
    account_id = service_account_id(grafana, target)
    seconds = min(2592000, math.ceil(deadline.remaining()) + DEADLINE_MARGIN_SECONDS + TOKEN_SLACK_SECONDS)
    token = grafana.create_workspace_service_account_token(
        workspaceId=target.workspace_id, serviceAccountId=account_id,
        name=f"{target.service_account}-{int(time.time())}", secondsToLive=seconds,
    )["serviceAccountToken"]
    try:
        api = GrafanaApi(target.endpoint, token["key"], deadline)
        upsert_data_sources(api, target, prometheus_type)
        ensure_folder(api)
        for dashboard in dashboards:
            api.call("POST", "/api/dashboards/db",
                     {"dashboard": {**dashboard.model, "uid": dashboard.uid, "id": None}, "overwrite": True})
        for rule in rules:
            upsert_alert_rule(api, rule)
    finally:
        delete_token(grafana, target.workspace_id, account_id, token["id"])
    return {"PhysicalResourceId": target.physical_id,
            "Data": {"Dashboards": str(len(dashboards)), "AlertRules": str(len(rules)),
                     "PrometheusDataSourceType": prometheus_type}}


def delete(props: Mapping[str, Any], physical_id: str) -> dict[str, Any]:
    """Remove the service account (with its tokens); never fail: content must not block a deletion."""
    workspace_id, _, account_name = physical_id.partition("/")
    if not WORKSPACE_ID.match(workspace_id) or not account_name:
        log(f"physical id {physical_id!r} names no service account: nothing to delete")
        return {"PhysicalResourceId": physical_id}
    try:
        grafana = aws_client("grafana", str(props.get("Region") or ""))
        for account in service_accounts(grafana, workspace_id):
            if account["name"] == account_name:
                grafana.delete_workspace_service_account(workspaceId=workspace_id, serviceAccountId=account["id"])
                log(f"deleted service account {account_name} of {workspace_id}")
    except (ClientError, BotoCoreError, ValueError) as error:
        log(f"left service account {account_name} of {workspace_id} in place: {one_line(str(error))}")
    return {"PhysicalResourceId": physical_id}


# --- properties ----------------------------------------------------------------------------------


def required(props: Mapping[str, Any], name: str, pattern: re.Pattern[str]) -> str:
    value = props.get(name)
    if not isinstance(value, str) or not pattern.match(value):
        raise ProvisionerError(f"property {name}={value!r} is missing or malformed")
    return value


def parse_target(props: Mapping[str, Any]) -> Target:
    return Target(
        workspace_id=required(props, "WorkspaceId", WORKSPACE_ID),
        endpoint=required(props, "WorkspaceEndpoint", HOST),
        region=required(props, "Region", REGION),
        prometheus_url=required(props, "PrometheusUrl", PROMETHEUS_URL),
        service_account=required(props, "ServiceAccountName", re.compile(r"^[A-Za-z0-9_-]{1,100}$")),
    )


def parse_content(raw: Any) -> dict[str, Any]:
    try:
        content = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        content = None
    if not isinstance(content, dict):
        raise ProvisionerError("property Content must be a JSON object")
    source = content.get("source")
    if not isinstance(source, str) or not source.endswith("/") or urlparse(source).scheme not in ("https", "s3"):
        raise ProvisionerError(f"Content.source={source!r} must be an https:// or s3:// prefix ending in /")
    dashboards = content.get("dashboards")
    if not isinstance(dashboards, list) or not dashboards:
        raise ProvisionerError("Content.dashboards must be a non-empty list")
    for entry in [*dashboards, content.get("alertRules")]:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or ".." in entry["path"] \
                or entry["path"].startswith("/") or not SHA256.match(str(entry.get("sha256", ""))):
            raise ProvisionerError(f"Content entry {entry!r} needs a relative path and a sha256")
    for entry in dashboards:
        if not GRAFANA_UID.match(str(entry.get("uid", ""))):
            raise ProvisionerError(f"dashboard uid {entry.get('uid')!r} is not a Grafana UID")
    return content


# --- content -------------------------------------------------------------------------------------


def fetch(source: str, entry: Mapping[str, str], region: str, deadline: Deadline) -> bytes:
    location = source + entry["path"]
    data = download_s3(location, region) if source.startswith("s3://") else download(location, deadline)
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise ProvisionerError(f"{location} has sha256 {digest}, expected {entry['sha256']}: refused")
    return data


def download(url: str, deadline: Deadline) -> bytes:
    for attempt in range(1, DOWNLOAD_ATTEMPTS + 1):
        try:
            status, body = send("GET", url, {"User-Agent": "hyperpod-grafana-provisioner"}, None,
                                call_timeout(deadline, f"downloading {url}"))
        except NETWORK_ERRORS as error:
            status, body = 0, str(error).encode()
        if status == 200:
            return body
        if status not in TRANSIENT_HTTP_CODES | {0} or attempt == DOWNLOAD_ATTEMPTS:
            raise ProvisionerError(f"download of {url} failed: {status or body.decode(errors='replace')}")
        log(f"download of {url} failed ({status or 'no answer'}); retrying")
        time.sleep(min(2**attempt, max(deadline.remaining() - 1, 0)))
    raise AssertionError("unreachable")


def download_s3(location: str, region: str) -> bytes:
    url = urlparse(location)
    try:
        body = aws_client("s3", region).get_object(Bucket=url.netloc, Key=url.path.lstrip("/"))["Body"]
        data: bytes = body.read(MAX_FILE_BYTES + 1)
    except (ClientError, BotoCoreError, *NETWORK_ERRORS) as error:
        # botocore's StreamingBody raises IncompleteReadError (a BotoCoreError) on a body cut short.
        raise ProvisionerError(f"download of {location} failed: {type(error).__name__}: {error}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ProvisionerError(f"{location} is larger than {MAX_FILE_BYTES} bytes")
    return data


def dashboard_model(path: str, data: bytes) -> dict[str, Any]:
    """The dashboard object of a template; a ``{"dashboard": ...}`` wrapper is unwrapped as Terraform does."""
    try:
        document = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ProvisionerError(f"{path} is not JSON: {error}") from None
    model = document.get("dashboard", document) if isinstance(document, dict) else None
    if not isinstance(model, dict):
        raise ProvisionerError(f"{path} holds no dashboard object")
    return model


def alert_rules(data: bytes) -> list[dict[str, Any]]:
    """Grafana provisioned alert rules from a Prometheus-style rules file (``groups[0].rules``), converted the
    way AWS's Lambda and Terraform module do: one instant PromQL query ``A`` on the ``prometheus`` data source."""
    try:
        document = parse_yaml_subset(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ProvisionerError(f"the alert rules file is not UTF-8: {error}") from None
    try:
        group = document["groups"][0]
        group_name, rules = str(group["name"]), group["rules"]
    except (KeyError, IndexError, TypeError):
        raise ProvisionerError("the alert rules file has no groups[0].name and groups[0].rules") from None
    converted = []
    for rule in rules:
        title, expr = rule.get("alert"), rule.get("expr")
        uid = f"{RULE_UID_PREFIX}{title}"
        if not isinstance(title, str) or not isinstance(expr, str) or not GRAFANA_UID.match(uid):
            raise ProvisionerError(f"alert rule {title!r} needs an alert name (for UID {uid!r}) and an expr")
        converted.append({
            "uid": uid, "title": title, "orgID": 1, "folderUID": ALERTS_FOLDER_UID, "ruleGroup": group_name,
            "condition": "A", "noDataState": "OK", "execErrState": "Error", "for": rule.get("for", "5m"),
            "labels": rule.get("labels") or {}, "annotations": rule.get("annotations") or {},
            "data": [{
                "refId": "A", "queryType": "", "relativeTimeRange": {"from": 600, "to": 0},
                "datasourceUid": PROMETHEUS_UID,
                "model": {"refId": "A", "expr": expr, "range": False, "instant": True, "editorMode": "code",
                          "legendFormat": "__auto"},
            }],
        })
    return converted


Yaml = dict[str, Any] | list[Any] | str | None
KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*):(?:[ \t]+(.*))?$")


def parse_yaml_subset(text: str) -> Any:
    """Block mappings and sequences with plain, single- or double-quoted scalars (all kept as strings): the
    subset the pinned rules file uses. The Lambda runtime ships no YAML parser, and the file's digest is
    checked before this runs, so anything outside the subset is refused rather than guessed."""
    if re.search(r"^ *\t", text, re.MULTILINE):
        raise ProvisionerError("the alert rules file is indented with tabs")
    lines = [(len(line) - len(line.lstrip(" ")), line.strip()) for line in text.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    value, end = _node(lines, 0, lines[0][0] if lines else 0)
    if end != len(lines):
        raise ProvisionerError(f"the alert rules file has unexpected indentation near {lines[end][1]!r}")
    return value


def _node(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[Yaml, int]:
    if i >= len(lines) or lines[i][0] != indent:
        return None, i
    return _sequence(lines, i, indent) if _is_item(lines[i][1]) else _mapping(lines, i, indent)


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _sequence(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    while i < len(lines) and lines[i][0] == indent and _is_item(lines[i][1]):
        rest = lines[i][1][1:].lstrip()
        if not rest:
            item, i = _node(lines, i + 1, lines[i + 1][0] if i + 1 < len(lines) else indent)
        elif KEY.match(rest):
            # "- key: value" opens a mapping whose keys line up with "key".
            offset = indent + len(lines[i][1]) - len(rest)
            lines[i] = (offset, rest)
            item, i = _mapping(lines, i, offset)
        else:
            item, i = _scalar(rest), i + 1
        items.append(item)
    return items, i


def _mapping(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[dict[str, Any], int]:
    mapping: dict[str, Any] = {}
    while i < len(lines) and lines[i][0] == indent and not _is_item(lines[i][1]):
        match = KEY.match(lines[i][1])
        if not match:
            raise ProvisionerError(f"the alert rules file has an unsupported line {lines[i][1]!r}")
        key, raw = match.group(1), match.group(2)
        if key in mapping:
            raise ProvisionerError(f"the alert rules file repeats the key {key!r}")
        if raw is not None:
            mapping[key], i = _scalar(raw), i + 1
        elif i + 1 < len(lines) and (lines[i + 1][0] > indent or
                                     (lines[i + 1][0] == indent and _is_item(lines[i + 1][1]))):
            mapping[key], i = _node(lines, i + 1, lines[i + 1][0])
        else:
            mapping[key], i = None, i + 1
    return mapping, i


def _scalar(raw: str) -> str:
    if raw.startswith("'"):
        if len(raw) < 2 or not raw.endswith("'") or "'" in raw[1:-1].replace("''", ""):
            raise ProvisionerError(f"unsupported quoted value {raw!r} in the alert rules file")
        return raw[1:-1].replace("''", "'")
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, str):
            raise ProvisionerError(f"unsupported quoted value {raw!r} in the alert rules file")
        return value
    if raw[0] in "[]{}&*!|>%@`" or " #" in raw or ": " in raw:
        raise ProvisionerError(f"unsupported value {raw!r} in the alert rules file")
    return raw


# --- Amazon Managed Grafana ----------------------------------------------------------------------


def grafana_version(grafana: Any, workspace_id: str) -> str:
    return str(grafana.describe_workspace(workspaceId=workspace_id)["workspace"]["grafanaVersion"])


def prometheus_type_for(version: str) -> str:
    """The data source type that reaches Amazon Managed Service for Prometheus in a workspace of ``version``:
    Grafana's core Prometheus data source with SigV4 before 12, the Amazon Managed Service for Prometheus
    plugin from 12 on (see AMP_PLUGIN_MAJOR)."""
    match = GRAFANA_VERSION.fullmatch(version)
    if match is None:
        raise ProvisionerError(f"the workspace reports Grafana version {version[:40]!r}, which is not a version "
                               "number: cannot tell which Prometheus data source it takes")
    return AMP_PLUGIN_TYPE if int(match.group(1)) >= AMP_PLUGIN_MAJOR else CORE_PROMETHEUS_TYPE


def retarget_prometheus(model: dict[str, Any], prometheus_type: str) -> dict[str, Any]:
    """A copy of a dashboard whose Prometheus references name ``prometheus_type``.

    AWS's dashboards (CONTENT_COMMIT of infra/constructs/grafana_content.py) are written for the core plugin: panels and
    queries refer to ``{"type": "prometheus", "uid": "${datasource}"}``, and the hidden ``datasource`` variable
    lists the data sources of plugin ``prometheus`` (``{"type": "datasource", "query": "prometheus"}``). A data
    source reference's ``type`` is "the plugin type-id", and a data source variable picks among the data sources
    of one plugin (https://grafana.com/docs/grafana/latest/observability-as-code/schema-v2/variables-schema/:
    DataSourceRef, DatasourceVariableKind pluginId): with the plugin's data source, the variable would find
    nothing. AMG updates the dashboards of the data sources it migrates itself (prometheus-manually-adding.md,
    above); this does the same for the dashboards it provisions. Other references (CloudWatch, Grafana's own)
    are kept."""
    if prometheus_type == CORE_PROMETHEUS_TYPE:
        return model

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        copy = {key: walk(value) for key, value in node.items()}
        reference = copy.get("datasource")
        if isinstance(reference, dict) and reference.get("type") == CORE_PROMETHEUS_TYPE:
            copy["datasource"] = {**reference, "type": prometheus_type}
        if copy.get("type") == "datasource" and copy.get("query") == CORE_PROMETHEUS_TYPE:
            copy["query"] = prometheus_type
        return copy

    retargeted: dict[str, Any] = walk(model)
    return retargeted


def aws_client(service: str, region: str) -> Any:
    config = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=10, read_timeout=30)
    return boto3.client(service, region_name=region, config=config)


def enable_alerting(grafana: Any, workspace_id: str, deadline: Deadline) -> None:
    """Grafana alerting on, as AWS's setups create the workspace ({"unifiedAlerting": {"enabled": true}});
    CloudFormation's AWS::Grafana::Workspace has no property for it. Other settings are kept."""
    raw = grafana.describe_workspace_configuration(workspaceId=workspace_id)["configuration"]
    try:
        configuration: Any = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
        problem = "" if isinstance(configuration, dict) else f"a JSON {type(configuration).__name__}"
    except ValueError as error:
        problem = f"not JSON: {error}"
    if problem:
        raise ProvisionerError(f"the configuration of workspace {workspace_id} is {problem}, not a JSON object: "
                               "fix it with aws grafana update-workspace-configuration")
    alerting = configuration.get("unifiedAlerting")
    alerting = alerting if isinstance(alerting, dict) else {}
    if alerting.get("enabled") is True:
        return
    configuration["unifiedAlerting"] = {**alerting, "enabled": True}
    log(f"turning on Grafana alerting in {workspace_id}")
    grafana.update_workspace_configuration(workspaceId=workspace_id, configuration=json.dumps(configuration))
    while (status := grafana.describe_workspace(workspaceId=workspace_id)["workspace"]["status"]) != "ACTIVE":
        if status.endswith("FAILED"):
            raise ProvisionerError(f"workspace {workspace_id} is {status} after turning on alerting")
        if deadline.remaining() < WORKSPACE_POLL_SECONDS + HTTP_TIMEOUT_SECONDS:
            raise ProvisionerError(f"workspace {workspace_id} still {status} after turning on alerting")
        time.sleep(WORKSPACE_POLL_SECONDS)


def delete_token(grafana: Any, workspace_id: str, account_id: str, token_id: str) -> None:
    """Runs whether or not provisioning worked; a failure here is logged and does not hide the first error
    (the token expires minutes later anyway)."""
    try:
        grafana.delete_workspace_service_account_token(
            workspaceId=workspace_id, serviceAccountId=account_id, tokenId=token_id)
        log(f"deleted token {token_id}")
    except (ClientError, BotoCoreError) as error:
        log(f"could not delete token {token_id}, it expires on its own: {one_line(str(error))}")


def service_accounts(grafana: Any, workspace_id: str) -> Iterator[dict[str, Any]]:
    for page in grafana.get_paginator("list_workspace_service_accounts").paginate(workspaceId=workspace_id):
        yield from page["serviceAccounts"]


def service_account_id(grafana: Any, target: Target) -> str:
    """The provisioner's ADMIN service account, created on first use and reused by every update."""
    for account in service_accounts(grafana, target.workspace_id):
        if account["name"] == target.service_account:
            return str(account["id"])
    log(f"creating service account {target.service_account} in {target.workspace_id}")
    created = grafana.create_workspace_service_account(
        workspaceId=target.workspace_id, name=target.service_account, grafanaRole="ADMIN")
    return str(created["id"])


# --- Grafana HTTP API ----------------------------------------------------------------------------


class RefuseRedirects(HTTPRedirectHandler):
    """A redirect is answered as the 3xx it is: the token must never follow it to another host."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


OPENER = build_opener(RefuseRedirects)
open_url = OPENER.open


def send(method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float) -> tuple[int, bytes]:
    """The one place an HTTP request leaves the function: (status, body), also for error statuses."""
    request = Request(url, data=body, headers=dict(headers), method=method)  # noqa: S310 - https only
    try:
        with open_url(request, timeout=timeout) as response:
            return int(response.status), bytes(response.read(MAX_FILE_BYTES + 1))
    except HTTPError as error:
        return int(error.code), bytes(error.read(4096) or b"")


class GrafanaApi:
    """Grafana's HTTP API on one workspace, authenticated with a service account token."""

    def __init__(self, endpoint: str, token: str, deadline: Deadline) -> None:
        self.base = f"https://{endpoint}"
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json",
                        "Content-Type": "application/json"}
        self.deadline = deadline

    def call(self, method: str, path: str, payload: Any = None, *, allow: frozenset[int] = frozenset(),
             headers: Mapping[str, str] | None = None) -> int:
        """Returns the status; any status other than 2xx or one in ``allow`` is a failure."""
        what = f"{method} {path}"
        try:
            status, body = send(method, self.base + path, {**self.headers, **(headers or {})},
                                None if payload is None else json.dumps(payload).encode(),
                                call_timeout(self.deadline, what))
        except NETWORK_ERRORS as error:
            raise ProvisionerError(f"Grafana {what} failed: {error}") from None
        log(f"{what} -> {status}")
        if 200 <= status < 300 or status in allow:
            return status
        raise ProvisionerError(f"Grafana {what} returned HTTP {status}: {body[:REASON_CHARS].decode(errors='replace')}")


def upsert_data_sources(api: GrafanaApi, target: Target, prometheus_type: str) -> None:
    """The two data sources AWS's setups create, signed with the workspace's IAM role (``ec2_iam_role``); the
    Prometheus one of ``prometheus_type`` (prometheus_type_for)."""
    signing = {"authType": "sigv4", "sigV4Auth": True, "sigV4Region": target.region,
               "defaultRegion": target.region, "httpMethod": "POST", "sigV4AuthType": "ec2_iam_role"}
    prometheus_json = signing
    if prometheus_type == AMP_PLUGIN_TYPE:
        # The plugin signs every request and takes the SigV4 settings of Grafana's HTTP client, the service name
        # "aps" by default (grafana/grafana-amazonprometheus-datasource@7abea3cb: docs/sources/configure.md, its
        # provisioning example: sigV4Auth, sigV4AuthType, sigV4Region, sigv4Service; "`default` or
        # `ec2_iam_role`" as base providers; pkg/datasource.go extendClientOpts). ec2_iam_role as AWS's setups
        # use for the workspace role; not checked against a live version 12 workspace.
        prometheus_json = {"sigV4Auth": True, "sigV4AuthType": "ec2_iam_role", "sigV4Region": target.region,
                           "sigv4Service": "aps", "httpMethod": "POST"}
    for source in (
        {"uid": CLOUDWATCH_UID, "name": "cloudwatch", "type": "cloudwatch", "access": "proxy",
         "isDefault": False, "jsonData": signing},
        {"uid": PROMETHEUS_UID, "name": "prometheus", "type": prometheus_type, "access": "proxy",
         "url": target.prometheus_url, "isDefault": True, "jsonData": prometheus_json},
    ):
        path = f"/api/datasources/uid/{quote(str(source['uid']))}"
        if api.call("GET", path, allow=frozenset({404})) == 404:
            api.call("POST", "/api/datasources", source)
        else:
            api.call("PUT", path, source)


def ensure_folder(api: GrafanaApi) -> None:
    if api.call("GET", f"/api/folders/{ALERTS_FOLDER_UID}", allow=frozenset({404})) == 404:
        api.call("POST", "/api/folders", {"uid": ALERTS_FOLDER_UID, "title": ALERTS_FOLDER_TITLE})


def upsert_alert_rule(api: GrafanaApi, rule: Mapping[str, Any]) -> None:
    # Without provenance, users may still edit the rules in Grafana (as AWS's Lambda sets it).
    headers = {"X-Disable-Provenance": "true"}
    path = f"/api/v1/provisioning/alert-rules/{quote(rule['uid'])}"
    if api.call("PUT", path, rule, allow=frozenset({404}), headers=headers) == 404:
        api.call("POST", "/api/v1/provisioning/alert-rules", rule, headers=headers)


# --- output --------------------------------------------------------------------------------------


def log(message: str) -> None:
    print(message, flush=True)
