"""`hpctl monitoring`: where to look at the cluster, from the outputs of the deployed observability stack."""

from __future__ import annotations

import argparse
import re
from typing import Any

from botocore.exceptions import ClientError

from hpctl.commands.options import add_command
from hpctl.errors import EXIT_AWS, EXIT_OK, HpctlError, UsageError
from hpctl.output import fields, print_json
from hpctl.target import Target

# The observability stack's CfnOutputs (infra/constructs/observability.py: GrafanaUrl, PrometheusEndpoint,
# DashboardUrl, AlertsTopicArn). CDK names an output by its construct path and an 8-character hash, so the output key
# is matched by the construct ID followed by the hash.
OUTPUTS = {"grafana_url": "GrafanaUrl", "prometheus_endpoint": "PrometheusEndpoint", "dashboard_url": "DashboardUrl",
           "alerts_topic_arn": "AlertsTopicArn"}
# AMP's workspace endpoint ends in /api/v1/ (botocore's amp model, WorkspaceDescription.prometheusEndpoint: "https://
# aps-workspaces.<region>.amazonaws.com/workspaces/ws-.../api/v1/"); PromQL instant queries go to its `query`
# (the Prometheus HTTP API's /api/v1/query). How a client signs those queries is not read here (unverified).
QUERY_PATH = "query"


def stack_name(config: Any) -> str:
    return f"{config.project}-observability"


def read_outputs(cloudformation: Any, stack: str, region: str) -> dict[str, str | None]:
    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        if "does not exist" in str(error.response.get("Error", {}).get("Message", "")):
            raise HpctlError(f"stack {stack} not found in {region}: deploy the app with observability on first",
                             EXIT_AWS) from None
        raise
    outputs = {o["OutputKey"]: o.get("OutputValue") for o in (stacks[0].get("Outputs") or [])}
    found: dict[str, str | None] = {}
    for field, construct_id in OUTPUTS.items():
        keys = [k for k in outputs if re.fullmatch(rf"\w*{construct_id}[0-9A-F]{{8}}", k)]
        found[field] = outputs[keys[0]] if keys else None
    endpoint = found["prometheus_endpoint"]
    found["prometheus_query_url"] = (endpoint if endpoint.endswith("/") else endpoint + "/") + QUERY_PATH \
        if endpoint else None
    return found


def cmd_monitoring(args: argparse.Namespace, t: Target, clients: Any) -> int:
    if not t.cfg.observability.any_enabled:
        raise UsageError("observability is off in the config: no Grafana, Prometheus or dashboard to show")
    stack = stack_name(t.cfg)
    found = read_outputs(clients("cloudformation"), stack, t.region)
    if args.json:
        print_json({"stack": stack, "region": t.region, **found})
        return EXIT_OK
    print(fields([("Grafana", found["grafana_url"]), ("AMP query endpoint", found["prometheus_query_url"]),
                  ("CloudWatch dashboard", found["dashboard_url"]), ("Alerts topic", found["alerts_topic_arn"])]))
    return EXIT_OK


def register(sub: Any) -> None:
    add_command(
        sub,
        "monitoring",
        cmd_monitoring,
        "the Grafana workspace URL, the AMP query endpoint and the CloudWatch dashboard URL of the deployed "
        "observability stack (a dash for what the config turns off)",
        "hpctl monitoring --config config/prod.yaml --json",
        need_config=True,
        need_cluster=False,
    )
