"""Every query of the dashboards and alert rules the Grafana content provisioner installs is allowed by the Grafana
workspace role, on the resource it reads (infra/facts/grafana_queries.py says which actions each kind calls)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from infra.constructs.grafana_content import (
    ALERT_RULES,
    CONTENT_COMMIT,
    CONTENT_DIR,
    CONTENT_REPOSITORY,
    DASHBOARDS,
)
from infra.facts.grafana_queries import (
    ACTIONS,
    AMP_PLUGIN,
    Query,
    UnknownQuery,
    alert_rule_queries,
    dashboard_queries,
)

ROOT = Path(__file__).resolve().parents[2]
# Written by scripts/extract_dashboard_queries.py from the pinned files, each checked against its digest.
EXTRACT: dict[str, Any] = json.loads((Path(__file__).parent / "dashboard_queries.json").read_text())


def test_the_extract_is_of_the_pinned_files():
    assert (EXTRACT["repository"], EXTRACT["commit"], EXTRACT["directory"]) == (
        CONTENT_REPOSITORY, CONTENT_COMMIT, CONTENT_DIR)
    pinned = {path: digest for _, path, digest in DASHBOARDS} | {ALERT_RULES[0]: ALERT_RULES[1]}
    assert {path: f["sha256"] for path, f in EXTRACT["files"].items()} == pinned
    assert {f["uid"] for f in EXTRACT["files"].values() if "uid" in f} == {uid for uid, _, _ in DASHBOARDS}
    assert all(f["queries"] for f in EXTRACT["files"].values())


def _granted(synth: Any) -> dict[str, list[Any]]:
    """Each action of the Grafana workspace policy and the resources it is allowed on."""
    (policy,) = [p for k, p in synth.resources("observability", "AWS::IAM::Policy").items()
                 if k.startswith("ObservabilityGrafanaWorkspacePolicy")]
    granted: dict[str, list[Any]] = {}
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        for action in actions:
            granted.setdefault(action, []).extend(resources)
    return granted


@pytest.mark.parametrize("path", sorted(EXTRACT["files"]))
def test_every_query_is_allowed_on_what_it_reads(default_synth, path):
    ((workspace_id, _),) = default_synth.resources("observability", "AWS::APS::Workspace").items()
    granted = _granted(default_synth)
    missing = []
    for where, datasource, kind in EXTRACT["files"][path]["queries"]:
        for action in ACTIONS[(datasource, kind)]:
            # aps actions on this cluster's workspace (their resource type is workspace*); the others take no
            # resource type, so "*".
            resource = {"Fn::GetAtt": [workspace_id, "Arn"]} if action.startswith("aps:") else "*"
            if resource not in granted.get(action, []):
                missing.append(f"{where}: {action} on {resource}")
    assert missing == []


def test_prometheus_reads_are_on_this_workspace_only_and_alertmanager_is_not_granted(default_synth):
    ((workspace_id, _),) = default_synth.resources("observability", "AWS::APS::Workspace").items()
    granted = _granted(default_synth)
    # aps:ListWorkspaces takes no resource type (Service Authorization Reference); every other aps action is scoped.
    scoped = {a: r for a, r in granted.items() if a.startswith("aps:") and a != "aps:ListWorkspaces"}
    assert scoped and scoped == {a: [{"Fn::GetAtt": [workspace_id, "Arn"]}] for a in scoped}
    assert not [a for a in granted if "AlertManager" in a]


# --- the classification ------------------------------------------------------------------------------------

# A dashboard in the shapes AWS's files use: a Prometheus and a CloudWatch data source variable, typed and untyped
# references, a row and a text panel carrying empty targets, an alert list panel.
SAMPLE = {"dashboard": {
    "annotations": {"list": [{"builtIn": 1, "datasource": {"type": "datasource", "uid": "grafana"}}]},
    "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus"},
        {"name": "cw", "type": "datasource", "query": "cloudwatch"},
        {"name": "node", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": {"qryType": 1, "query": "label_values(kube_node_info,node)"}},
        {"name": "region", "type": "query", "datasource": {"uid": "${cw}"}, "query": "regions()"},
        {"name": "fs", "type": "query", "datasource": {"uid": "$cw"},
         "query": {"queryType": "dimensionValues", "namespace": "AWS/FSx", "dimensionKey": "FileSystemId"}},
        {"name": "job", "type": "constant", "query": "node-exporter"},
    ]},
    "panels": [
        {"id": 1, "type": "row", "title": "Row", "targets": [{"datasource": {"uid": "$datasource"}, "refId": "A"}],
         "panels": [{"id": 2, "type": "timeseries", "title": "GPU",
                     "targets": [{"datasource": {"uid": "$datasource"}, "expr": "DCGM_FI_DEV_GPU_UTIL",
                                  "refId": "A"}]}]},
        {"id": 3, "type": "text", "title": "Doc", "targets": [{"datasource": {"uid": "$datasource"}, "refId": "A"}]},
        {"id": 4, "type": "timeseries", "title": "FSx", "datasource": {"type": "cloudwatch", "uid": "${cw}"},
         "targets": [{"queryMode": "Metrics", "metricQueryType": 0, "metricEditorMode": 0, "namespace": "AWS/FSx",
                      "refId": "A"}]},
        {"id": 5, "type": "alertlist", "title": "Alerts"},
    ],
}}


def test_every_query_of_a_dashboard_is_found_with_its_kind():
    assert dashboard_queries(SAMPLE) == [
        Query("variable node", "prometheus", "label_values"),
        Query("variable region", "cloudwatch", "regions"),
        Query("variable fs", "cloudwatch", "dimension_values"),
        Query("panel 2 'GPU' target A", "prometheus", "query"),
        Query("panel 4 'FSx' target A", "cloudwatch", "metrics"),
        Query("panel 5 'Alerts'", "prometheus", "rules"),
    ]


def test_the_amazon_prometheus_plugin_queries_as_prometheus():
    retargeted = json.loads(json.dumps(SAMPLE).replace('"query": "prometheus"', f'"query": "{AMP_PLUGIN}"'))
    assert [q.kind for q in dashboard_queries(retargeted)] == [q.kind for q in dashboard_queries(SAMPLE)]


@pytest.mark.parametrize("change", [
    # A CloudWatch Logs query, an ad hoc filter variable, an annotation from CloudWatch alarms, an untyped reference.
    lambda d: d["panels"][2]["targets"][0].update(queryMode="Logs"),
    lambda d: d["templating"]["list"].append({"name": "f", "type": "adhoc", "datasource": {"uid": "$cw"}}),
    lambda d: d["annotations"]["list"].append({"name": "alarms", "datasource": {"type": "cloudwatch", "uid": "x"}}),
    lambda d: d["panels"][3].update(type="stat", targets=[{"datasource": {"uid": "nowhere"}, "refId": "A"}]),
])
def test_a_query_of_unknown_calls_is_refused(change):
    dashboard = json.loads(json.dumps(SAMPLE["dashboard"]))
    change(dashboard)
    with pytest.raises(UnknownQuery):
        dashboard_queries(dashboard)


def test_every_kind_found_has_its_actions():
    kinds = {(q.datasource, q.kind) for q in dashboard_queries(SAMPLE)}
    rules = {"groups": [{"rules": [{"alert": "A", "expr": "x"}]}]}
    kinds |= {(q.datasource, q.kind) for q in alert_rule_queries(rules)}
    assert kinds <= set(ACTIONS)


def test_the_extract_script_refuses_a_file_that_is_not_the_pinned_one(monkeypatch):
    spec = importlib.util.spec_from_file_location("extract_dashboard_queries",
                                                  ROOT / "scripts" / "extract_dashboard_queries.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "read", lambda path, git_dir: b"{}")
    with pytest.raises(SystemExit, match=r"dashboards/templates/cluster.json: sha256 .*, pinned e3e4152d"):
        script.extract(None)
    text = script.render({"files": {"a": {"queries": [["w", "prometheus", "query"]]}}})
    assert '["w", "prometheus", "query"]' in text and json.loads(text)["files"]["a"]["queries"] == [
        ["w", "prometheus", "query"]]
