"""What the Grafana content this product provisions asks AWS for: the kind of every query a dashboard holds, and the
IAM actions Grafana's data source calls for each kind.

``dashboard_queries(model)`` lists the queries of one dashboard model (its panels' targets, its template variables,
its annotations, its alert list panels) as ``Query`` records; ``ACTIONS`` names the actions of each kind. The Grafana
workspace role (``ManagedGrafana``, infra/constructs/observability.py) must allow them on the workspace it reads for
the dashboards to show data: tests/grafana_content/test_dashboard_permissions.py checks it against every query of
the pinned dashboards (infra/constructs/grafana_content.py, DASHBOARDS). A query of a kind not described here is
refused (``UnknownQuery``): a new dashboard version that asks for more must be read and granted, not guessed.

Grafana's sources are read in grafana/grafana at the commits named beside each fact (the index holds versions of
different dates); the Grafana version an Amazon Managed Grafana workspace runs (10.4 or 12.4) was not checked
against them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PROMETHEUS = "prometheus"
CLOUDWATCH = "cloudwatch"
# Amazon Managed Grafana 12 serves Amazon Managed Service for Prometheus through this plugin, to which the
# provisioner points the dashboards (infra/runtime/grafana_content/handler.py, AMP_PLUGIN_TYPE): the same queries.
AMP_PLUGIN = "grafana-amazonprometheus-datasource"

# (data source plugin type, kind of query) -> the IAM actions Grafana's data source calls for it.
ACTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    # A PromQL expression (a panel's target, an alert rule): /api/v1/query and /api/v1/query_range, which Amazon
    # Managed Service for Prometheus authorizes as QueryMetrics
    # (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-APIReference-QueryMetrics.html).
    (PROMETHEUS, "query"): ("aps:QueryMetrics",),
    # A label_values(...) variable: /api/v1/label/<name>/values (GetLabels, AMP-APIReference-GetLabels.html) or,
    # depending on the Grafana version and on whether a metric is named, /api/v1/series (GetSeries,
    # AMP-APIReference-GetSeries.html): both.
    (PROMETHEUS, "label_values"): ("aps:GetLabels", "aps:GetSeries"),
    # An alert list panel: Grafana fetches the rules of every rules source (grafana/grafana@
    # 335be0ce6a5429075acb3d67ff0d6c30b0a1c46f: public/app/plugins/panel/alertlist/UnifiedAlertList.tsx,
    # fetchAllPromRulesAction), which includes every Prometheus-flavoured data source (prometheus and
    # grafana-amazonprometheus-datasource) whose jsonData.manageAlerts is on or unset (grafana/grafana@
    # 014fd73c4060ca88941eaacc0972345844b8ec38: public/app/features/alerting/unified/utils/datasource.ts,
    # getRulesDataSources, isDataSourceManagingAlerts): the provisioner sets no manageAlerts. That is
    # GET /api/v1/rules on the workspace, authorized as ListRules (AMP-APIReference-ListRules.html).
    (PROMETHEUS, "rules"): ("aps:ListRules",),
    # A CloudWatch metric query (queryMode Metrics, metricQueryType 0 "search", builder mode): GetMetricData
    # (grafana/grafana@00e3f1b4d5dec290c5f8443229725e2e6545ebc8: pkg/tsdb/cloudwatch/get_metric_data_executor.go);
    # a dimension "*" without matchExact is first expanded with ListMetrics (grafana/grafana@
    # 1daf1436170745cbb6e080b724a9f776398ee04d: pkg/tsdb/cloudwatch/get_dimension_values_for_wildcards.go).
    # GetMetricStatistics is what Grafana before 7 called (grafana/grafana@3e09b5106565f09ebd372f3a354067b29d97fa63:
    # pkg/tsdb/cloudwatch/get_metric_statistics.go), no version Amazon Managed Grafana runs.
    (CLOUDWATCH, "metrics"): ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics"),
    # A dimensionValues variable: ListMetrics (grafana/grafana@01676f4a9e387c3510c6432315ad2754340afb98:
    # pkg/tsdb/cloudwatch/services/list_metrics.go, GetDimensionValuesByDimensionFilter).
    (CLOUDWATCH, "dimension_values"): ("cloudwatch:ListMetrics",),
    # A regions() variable: EC2 DescribeRegions (grafana/grafana@0cfdf4727a04ee3624b3724ef2692a1be354ef6b:
    # pkg/tsdb/cloudwatch/services/regions.go; on failure Grafana falls back to its own list).
    (CLOUDWATCH, "regions"): ("ec2:DescribeRegions",),
}
# Not a kind any provisioned dashboard holds, so not granted: CloudWatch annotation queries (DescribeAlarms,
# DescribeAlarmsForMetric, DescribeAlarmHistory: grafana/grafana pkg/tsdb/cloudwatch/annotation_query.go), CloudWatch
# Logs queries, and Alertmanager reads (an Alertmanager data source, which the provisioner does not create).

# Grafana's own data sources (built-in annotations, the "-- Grafana --" source, data source variables): no AWS call.
_GRAFANA_BUILT_IN = {"grafana", "datasource", "-- Grafana --"}
# Template variables that send nothing to a data source.
_LOCAL_VARIABLES = {"datasource", "custom", "constant", "interval", "textbox"}
# Panels that run no query even when their JSON carries an (empty) target.
_QUERYLESS_PANELS = {"row", "text"}
_VARIABLE_REF = re.compile(r"^\$\{?(\w+)\}?$")


class UnknownQuery(ValueError):
    """A query this module does not know the AWS calls of."""


@dataclass(frozen=True)
class Query:
    """One query of a dashboard: where it is, its data source plugin type, and its kind (a key of ACTIONS)."""

    where: str
    datasource: str
    kind: str


def dashboard_queries(model: dict[str, Any]) -> list[Query]:
    """Every query ``model`` (a dashboard's JSON, or a file holding it under ``dashboard``) sends to a data source
    that reaches AWS; raises UnknownQuery on one it cannot classify."""
    model = model.get("dashboard", model)
    variables = {v.get("name"): v for v in (model.get("templating") or {}).get("list", [])}
    queries: list[Query] = []
    for variable in variables.values():
        queries += _variable_queries(variable, variables)
    for i, annotation in enumerate((model.get("annotations") or {}).get("list", [])):
        plugin = _plugin(annotation.get("datasource"), variables)
        if plugin not in _GRAFANA_BUILT_IN:
            raise UnknownQuery(f"annotation {i} ({annotation.get('name')!r}) on a {plugin} data source")
    for panel in _panels(model.get("panels", [])):
        queries += _panel_queries(panel, variables)
    return queries


def alert_rule_queries(rules_file: dict[str, Any]) -> list[Query]:
    """The queries of a Prometheus-style rules file as the provisioner converts it: one PromQL query of the
    ``prometheus`` data source per rule (infra/runtime/grafana_content/handler.py, alert_rules)."""
    return [Query(f"alert rule {rule.get('alert')}", PROMETHEUS, "query")
            for group in rules_file.get("groups", []) for rule in group.get("rules", [])]


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])


def _plugin(reference: Any, variables: dict[str, dict[str, Any]]) -> str:
    """The plugin type a data source reference resolves to: its ``type``, else the plugin a ``$variable`` of type
    datasource lists (``query``), else what a string reference names."""
    if isinstance(reference, dict):
        if reference.get("type"):
            return _canonical(str(reference["type"]))
        uid = str(reference.get("uid", ""))
    else:
        uid = "" if reference is None else str(reference)
    if uid in _GRAFANA_BUILT_IN:
        return "grafana"
    match = _VARIABLE_REF.match(uid)
    if match and variables.get(match.group(1), {}).get("type") == "datasource":
        return _canonical(str(variables[match.group(1)]["query"]))
    raise UnknownQuery(f"data source reference {reference!r} names no plugin")


def _canonical(plugin: str) -> str:
    return PROMETHEUS if plugin == AMP_PLUGIN else plugin


def _variable_queries(variable: dict[str, Any], variables: dict[str, dict[str, Any]]) -> list[Query]:
    kind = variable.get("type")
    name = variable.get("name")
    if kind in _LOCAL_VARIABLES:
        return []
    if kind != "query":
        raise UnknownQuery(f"variable {name!r} of type {kind!r}")
    plugin = _plugin(variable.get("datasource"), variables)
    query = variable.get("query")
    text = query.get("query") if isinstance(query, dict) else query
    where = f"variable {name}"
    if plugin == PROMETHEUS and isinstance(text, str) and text.strip().startswith("label_values("):
        return [Query(where, PROMETHEUS, "label_values")]
    if plugin == CLOUDWATCH and text == "regions()":
        return [Query(where, CLOUDWATCH, "regions")]
    if plugin == CLOUDWATCH and isinstance(query, dict) and query.get("queryType") == "dimensionValues":
        return [Query(where, CLOUDWATCH, "dimension_values")]
    raise UnknownQuery(f"{where}: a {plugin} query {query!r}")


def _panel_queries(panel: dict[str, Any], variables: dict[str, dict[str, Any]]) -> list[Query]:
    kind = panel.get("type")
    where = f"panel {panel.get('id')} {panel.get('title')!r}"
    if kind == "alertlist":
        return [Query(where, PROMETHEUS, "rules")]
    if kind in _QUERYLESS_PANELS:
        return []
    queries = []
    for target in panel.get("targets") or []:
        plugin = _plugin(target.get("datasource") or panel.get("datasource"), variables)
        at = f"{where} target {target.get('refId')}"
        if plugin == "grafana":
            continue
        if plugin == PROMETHEUS and str(target.get("expr") or "").strip():
            queries.append(Query(at, PROMETHEUS, "query"))
        elif (plugin == CLOUDWATCH and target.get("queryMode") == "Metrics" and target.get("metricQueryType") == 0
              and target.get("metricEditorMode") == 0):
            queries.append(Query(at, CLOUDWATCH, "metrics"))
        else:
            raise UnknownQuery(f"{at}: a {plugin} target {sorted(target)}")
    return queries
