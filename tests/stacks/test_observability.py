"""ObservabilityStack intent: each piece present, least privilege, after HyperPod, switchable alone."""

from __future__ import annotations

import json

import pytest

from infra.facts.intrinsics import render


def _one(synth, cfn_type):
    items = list(synth.resources("observability", cfn_type).items())
    assert len(items) == 1, [k for k, _ in items]
    return items[0]


def _addon(synth, name):
    return next(a["Properties"] for a in synth.resources("observability", "AWS::EKS::Addon").values()
                if a["Properties"]["AddonName"] == name)


def _policy(synth, prefix):
    policies = synth.resources("observability", "AWS::IAM::Policy")
    (policy,) = [p for k, p in policies.items() if k.startswith(prefix)]
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def _role(synth, logical_id):
    return synth.template("observability")["Resources"][logical_id]["Properties"]


def test_stack_comes_after_the_hyperpod_cluster_and_reads_no_other_stack(default_synth):
    stack = default_synth.app.observability
    assert default_synth.app.hyperpod in stack.dependencies
    assert "Fn::ImportValue" not in json.dumps(default_synth.template("observability"))


def test_container_insights_addon_runs_on_its_own_pod_identity_role(default_synth):
    addon = _addon(default_synth, "amazon-cloudwatch-observability")
    (association,) = addon["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "cloudwatch-agent"
    role_id = association["RoleArn"]["Fn::GetAtt"][0]
    assert role_id.startswith("ObservabilityContainerInsightsAgentRole")
    trust = _role(default_synth, role_id)["AssumeRolePolicyDocument"]["Statement"]
    assert {s["Principal"]["Service"] for s in trust} == {"pods.eks.amazonaws.com"}
    assert "aws:SourceArn" in json.dumps(trust) and "hyperpod-dev-eks" in json.dumps(trust)
    metrics = _policy(default_synth, "ObservabilityContainerInsightsAgentPolicy")["ContainerInsightsMetrics"]
    assert metrics["Condition"]["StringEquals"]["cloudwatch:namespace"] == ["ContainerInsights", "CWAgent"]
    groups = [g["Properties"]["LogGroupName"] for g in default_synth.resources("observability", "AWS::Logs::LogGroup")
              .values() if "LogGroupName" in g["Properties"]]
    assert "/aws/containerinsights/hyperpod-dev-eks/performance" in groups


def test_prometheus_workspace_with_customer_key_and_logging(default_synth):
    _, workspace = _one(default_synth, "AWS::APS::Workspace")
    props = workspace["Properties"]
    key_id = props["KmsKeyArn"]["Fn::GetAtt"][0]
    key = default_synth.template("observability")["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True
    assert "LogGroupArn" in props["LoggingConfiguration"]
    assert workspace["DeletionPolicy"] == "Retain"


def test_collector_may_remote_write_to_this_workspace_only(default_synth):
    workspace_id, _ = _one(default_synth, "AWS::APS::Workspace")
    statements = _policy(default_synth, "ObservabilityPrometheusCollectorPolicy")
    assert statements["RemoteWriteThisWorkspace"]["Action"] == "aps:RemoteWrite"
    assert statements["RemoteWriteThisWorkspace"]["Resource"] == {"Fn::GetAtt": [workspace_id, "Arn"]}
    assert all("aps:" not in json.dumps(s["Action"]) for sid, s in statements.items()
               if sid != "RemoteWriteThisWorkspace")


def test_hyperpod_observability_addon_is_configured_from_config(default_synth):
    addon = _addon(default_synth, "amazon-sagemaker-hyperpod-observability")
    (association,) = addon["PodIdentityAssociations"]
    assert association["ServiceAccount"] == "hyperpod-observability-operator-otel-collector"
    configuration = json.loads(render(addon["ConfigurationValues"]))
    assert configuration["metricsProvider"]["acceleratedComputeMetrics"] == {"level": "BASIC", "scrapeInterval": 30}
    assert configuration["metricsProvider"]["networkMetrics"] == {"level": "DISABLED", "scrapeInterval": 30}
    assert configuration["logging"] == {"enabled": False}
    assert configuration["amgWorkspace"]["workspaceName"] == default_synth.config.project
    assert configuration["ampWorkspace"]["prometheusEndpoint"].startswith("https://aps-workspaces.")
    assert not configuration["ampWorkspace"]["prometheusEndpoint"].endswith("/")


OBSERVABILITY_TAGGED = ("AWS::APS::Workspace", "AWS::Grafana::Workspace", "AWS::EKS::Addon")


def test_workspaces_and_addon_carry_the_tag_the_observability_admin_policy_tests(default_synth):
    # AWS's Terraform tags all three SageMaker=true (modules/observability/prometheus_workspace.tf,
    # grafana_workspace.tf, eks_addon.tf), and AmazonSageMakerHyperPodObservabilityAdminAccess allows creating them,
    # and updating or deleting the add-on's Pod Identity association, only with that tag.
    _, prometheus = _one(default_synth, "AWS::APS::Workspace")
    _, grafana = _one(default_synth, "AWS::Grafana::Workspace")
    addon = _addon(default_synth, "amazon-sagemaker-hyperpod-observability")
    for tags in (prometheus["Properties"]["Tags"], grafana["Properties"]["Tags"], addon["Tags"]):
        assert {"Key": "SageMaker", "Value": "true"} in tags
    # Only that add-on: Container Insights is not the add-on the policy names.
    assert "SageMaker" not in json.dumps(_addon(default_synth, "amazon-cloudwatch-observability").get("Tags", []))


@pytest.mark.parametrize("resource_type", OBSERVABILITY_TAGGED)
def test_tagging_a_deployed_workspace_or_addon_updates_it_in_place(resource_type):
    from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER

    from infra.guards.create_only import SCHEMA_REGION, schema_create_only

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(SCHEMA_REGION, resource_type).schema
    assert schema["tagging"]["tagUpdatable"] is True
    assert "/properties/Tags" not in schema_create_only(resource_type)


def test_addon_metric_levels_follow_config(variant_synth):
    addon = _addon(variant_synth, "amazon-sagemaker-hyperpod-observability")
    configuration = json.loads(render(addon["ConfigurationValues"]))
    expected = variant_synth.config.observability.prometheus.metrics
    assert configuration["metricsProvider"]["networkMetrics"]["level"] == expected.network.level
    assert configuration["logging"]["enabled"] is variant_synth.config.observability.prometheus.logging


def test_grafana_reads_only_this_prometheus_workspace_and_cloudwatch(default_synth):
    workspace_id, _ = _one(default_synth, "AWS::APS::Workspace")
    _, grafana = _one(default_synth, "AWS::Grafana::Workspace")
    props = grafana["Properties"]
    assert props["AuthenticationProviders"] == ["AWS_SSO"]
    assert set(props["DataSources"]) == {"PROMETHEUS", "CLOUDWATCH"}
    assert props["PermissionType"] == "CUSTOMER_MANAGED"
    statements = _policy(default_synth, "ObservabilityGrafanaWorkspacePolicy")
    assert statements["QueryThisPrometheusWorkspace"]["Resource"] == {"Fn::GetAtt": [workspace_id, "Arn"]}
    wide = statements["ReadCloudWatch"]["Action"]
    assert all(a.split(":")[1].startswith(("Describe", "List", "Get", "Start", "Stop")) for a in wide)
    assert default_synth.resources("observability", "Custom::AWS") == {}
    assert "NetworkAccessControl" not in props


def test_grafana_queries_only_this_clusters_log_groups(default_synth):
    statements = _policy(default_synth, "ObservabilityGrafanaWorkspacePolicy")
    assert not [a for a in statements["ReadCloudWatch"]["Action"]
                if a in ("logs:StartQuery", "logs:GetQueryResults", "logs:GetLogEvents", "logs:GetLogGroupFields")]
    logs = statements["QueryThisClustersLogs"]
    # Stack.format_arn: the partition and region of a stack whose region is known are literals.
    prefix = "arn:aws:logs:us-west-2:<AWS::AccountId>:log-group:"
    groups = {render(r).removeprefix(prefix) for r in logs["Resource"]}
    assert groups == {"/aws/eks/hyperpod-dev-eks/cluster", "/aws/eks/hyperpod-dev-eks/cluster:*",
                      "/aws/containerinsights/hyperpod-dev-eks/*", "/aws/containerinsights/hyperpod-dev-eks/*:*",
                      "/aws/sagemaker/Clusters/hyperpod-dev/*", "/aws/sagemaker/Clusters/hyperpod-dev/*:*"}


def test_grafana_network_access_from_config(byo_synth):
    _, grafana = _one(byo_synth, "AWS::Grafana::Workspace")
    assert grafana["Properties"]["NetworkAccessControl"] == {"PrefixListIds": ["pl-0123456789abcdef0"]}


def test_collector_writes_only_this_hyperpod_clusters_log_groups(default_synth):
    statements = _policy(default_synth, "ObservabilityPrometheusCollectorPolicy")
    resources = {render(r) for r in statements["HyperPodClusterLogs"]["Resource"]}
    prefix = "arn:aws:logs:us-west-2:<AWS::AccountId>:log-group:/aws/sagemaker/Clusters/"
    assert resources == {f"{prefix}hyperpod-dev/*", f"{prefix}hyperpod-dev/*:log-stream:*"}


def test_grafana_admins_from_config(variant_synth):
    (admins,) = variant_synth.resources("observability", "Custom::AWS").values()
    create = json.dumps(admins["Properties"]["Create"])
    assert "UpdatePermissions" in create and "SSO_USER" in create and "ADMIN" in create


def test_grafana_admins_removed_from_the_config_are_revoked_after_the_grant(variant_synth, default_synth):
    resources = variant_synth.template("observability")["Resources"]
    ((admins_id, _),) = variant_synth.resources("observability", "Custom::AWS").items()
    (revocation,) = variant_synth.resources("observability", "Custom::HyperPodGrafanaAdminRevocation").values()
    props = revocation["Properties"]
    assert json.loads(props["AdminUserIds"]) == ["9067c7ea2d-11111111-2222-3333-4444-555555555555"]
    assert json.loads(props["AdminGroupIds"]) == []
    assert admins_id in revocation["DependsOn"]
    # Its function may only change the permissions of this workspace.
    (function,) = [f for f in resources.values() if f["Type"] == "AWS::Lambda::Function"
                   and f["Properties"].get("Handler") == "runtime.grafana_content.admins.on_event"]
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [s for r in resources.values() if r["Type"] == "AWS::IAM::Policy"
                  and {"Ref": role} in r["Properties"]["Roles"]
                  for s in r["Properties"]["PolicyDocument"]["Statement"]]
    (grant,) = [s for s in statements if s["Action"] == "grafana:UpdatePermissions"]
    assert "Fn::GetAtt" in json.dumps(grant["Resource"]) and "/workspaces/" in json.dumps(grant["Resource"])
    # Without admins there is nothing to revoke.
    assert default_synth.resources("observability", "Custom::HyperPodGrafanaAdminRevocation") == {}


def test_alert_rule_matches_this_cluster_at_configured_levels(default_synth, variant_synth):
    _, rule = _one(default_synth, "AWS::Events::Rule")
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.sagemaker"]
    assert pattern["detail-type"] == ["SageMaker HyperPod Cluster Event"]
    assert pattern["detail"]["EventDetails"] == {"ClusterName": ["hyperpod-dev"], "EventLevel": ["Error"]}
    (target,) = rule["Properties"]["Targets"]
    transformer = target["InputTransformer"]
    paths = transformer["InputPathsMap"]
    for field in ("ClusterName", "InstanceGroupName", "InstanceId", "Description", "EventLevel"):
        assert f"$.detail.EventDetails.{field}" in paths.values()
    _, variant_rule = _one(variant_synth, "AWS::Events::Rule")
    assert variant_rule["Properties"]["EventPattern"]["detail"]["EventDetails"]["EventLevel"] == ["Warn", "Error"]


def test_alert_topic_is_encrypted_tls_only_and_subscribed_when_asked(default_synth, variant_synth):
    _, topic = _one(default_synth, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic["Properties"]
    policy = json.dumps(default_synth.resources("observability", "AWS::SNS::TopicPolicy"))
    assert "aws:SecureTransport" in policy and "events.amazonaws.com" in policy
    assert default_synth.resources("observability", "AWS::SNS::Subscription") == {}
    (subscription,) = variant_synth.resources("observability", "AWS::SNS::Subscription").values()
    assert subscription["Properties"] == {**subscription["Properties"], "Protocol": "email",
                                          "Endpoint": "oncall@example.com"}


def test_failed_node_alarm_notifies_the_topic(default_synth):
    _, alarm = _one(default_synth, "AWS::CloudWatch::Alarm")
    props = alarm["Properties"]
    assert props["MetricName"] == "cluster_failed_node_count"
    assert props["Dimensions"] == [{"Name": "ClusterName", "Value": "hyperpod-dev-eks"}]
    topic_id, _ = _one(default_synth, "AWS::SNS::Topic")
    assert props["AlarmActions"] == [{"Ref": topic_id}]
    _, policy = _one(default_synth, "AWS::SNS::TopicPolicy")
    publishers = {s["Principal"].get("Service"): s for s in policy["Properties"]["PolicyDocument"]["Statement"]
                  if s["Effect"] == "Allow" and "sns:Publish" in s["Action"]}
    assert set(publishers) == {"events.amazonaws.com", "cloudwatch.amazonaws.com"}
    # Each service may publish only for its own rule or alarm, never unconditioned.
    rule_id, _ = _one(default_synth, "AWS::Events::Rule")
    events_condition = publishers["events.amazonaws.com"]["Condition"]
    assert events_condition["ArnEquals"] == {"aws:SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}
    assert events_condition["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert "aws:SourceArn" in json.dumps(publishers["cloudwatch.amazonaws.com"]["Condition"])
    keys = default_synth.resources("observability", "AWS::KMS::Key")
    key = next(k for logical_id, k in keys.items() if logical_id.startswith("ObservabilityAlerts"))
    key_users = {s["Principal"].get("Service") for s in key["Properties"]["KeyPolicy"]["Statement"]
                 if "kms:GenerateDataKey*" in s["Action"]}
    assert {"events.amazonaws.com", "cloudwatch.amazonaws.com"} <= key_users


def test_dashboard_shows_gpu_efa_nodes_and_events(default_synth):
    _, dashboard = _one(default_synth, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in ("node_gpu_utilization", "node_gpu_memory_utilization", "node_efa_rx_bytes",
                   "cluster_failed_node_count", "TriggeredRules"):
        assert metric in body


def test_outputs(default_synth):
    descriptions = {o.get("Description") for o in default_synth.template("observability")["Outputs"].values()}
    assert {"Amazon Managed Grafana URL", "Amazon Managed Service for Prometheus endpoint", "SNS topic of alerts",
            "CloudWatch dashboard URL"} <= descriptions


def test_pieces_switch_off_without_touching_other_stacks(default_synth, observability_minimal_synth):
    minimal = observability_minimal_synth
    types = {r["Type"] for r in minimal.template("observability")["Resources"].values()}
    assert "AWS::Grafana::Workspace" not in types and "AWS::CloudWatch::Dashboard" not in types
    assert [a["Properties"]["AddonName"] for a in minimal.resources("observability", "AWS::EKS::Addon").values()] \
        == ["amazon-sagemaker-hyperpod-observability"]
    addon = _addon(minimal, "amazon-sagemaker-hyperpod-observability")
    assert "amgWorkspace" not in json.dumps(addon["ConfigurationValues"])
    for part in ("network", "eks", "hyperpod"):
        assert minimal.template(part) == default_synth.template(part), part


@pytest.mark.parametrize("variant", ["observability_minimal_synth"])
def test_minimal_variant_passes_nag(request, variant):
    synth = request.getfixturevalue(variant)
    report = json.loads((synth.outdir / "validation-report.json").read_text())
    assert all(p["conclusion"] == "success" for p in report["pluginReports"])


def _content(synth):
    (content,) = synth.resources("observability", "Custom::HyperPodGrafanaContent").values()
    return content["Properties"]


def test_grafana_content_follows_both_workspaces_and_cannot_hang_the_stack(default_synth):
    from infra.constructs import grafana_content

    grafana_id, _ = _one(default_synth, "AWS::Grafana::Workspace")
    prometheus_id, _ = _one(default_synth, "AWS::APS::Workspace")
    props = _content(default_synth)
    assert props["WorkspaceId"] == {"Fn::GetAtt": [grafana_id, "Id"]}
    assert props["WorkspaceEndpoint"] == {"Fn::GetAtt": [grafana_id, "Endpoint"]}
    assert props["PrometheusUrl"]["Fn::Join"][1][-1] == {"Fn::GetAtt": [prometheus_id, "WorkspaceId"]}
    assert {"Ref": "AWS::URLSuffix"} in props["PrometheusUrl"]["Fn::Join"][1]
    assert props["ServiceTimeout"] == "600"
    content = json.loads(props["Content"])
    assert content["source"] == grafana_content.GITHUB_SOURCE
    assert f"/{grafana_content.CONTENT_COMMIT}/" in content["source"]
    assert [d["sha256"] for d in content["dashboards"]] == [d[2] for d in grafana_content.DASHBOARDS]
    functions = default_synth.resources("observability", "AWS::Lambda::Function")
    provisioner = next(f for k, f in functions.items() if k.startswith("ObservabilityGrafanaContentFunction"))
    assert provisioner["Properties"]["Timeout"] == 300 and "VpcConfig" not in provisioner["Properties"]


def test_grafana_content_may_manage_this_workspace_only(default_synth, variant_synth):
    grafana_id, _ = _one(default_synth, "AWS::Grafana::Workspace")
    statements = _policy(default_synth, "ObservabilityGrafanaContentPolicy")
    assert set(statements) == {"ThisWorkspaceOnly"}
    scope = statements["ThisWorkspaceOnly"]["Resource"]
    assert scope["Fn::Join"][1][-2:] == [":/workspaces/", {"Fn::GetAtt": [grafana_id, "Id"]}]
    assert all(a.startswith("grafana:") and "*" not in a for a in statements["ThisWorkspaceOnly"]["Action"])
    variant = _policy(variant_synth, "ObservabilityGrafanaContentPolicy")
    assert variant["ReadContentCopy"]["Action"] == "s3:GetObject"
    # Stack.format_arn: the stack's region (us-west-2) fixes the partition.
    assert variant["ReadContentCopy"]["Resource"] == "arn:aws:s3:::dashboards-copy-111122223333/hyperpod/*"
    assert json.loads(_content(variant_synth)["Content"])["source"] == "s3://dashboards-copy-111122223333/hyperpod/"


def test_grafana_content_switches_off_with_its_flag_or_with_grafana(observability_minimal_synth):
    from aws_cdk import RemovalPolicy, Stack
    from aws_cdk import aws_logs as logs

    from infra.config import GrafanaConfig, PrometheusConfig
    from infra.constructs.observability import HyperPodObservability
    from tests.conftest import cdk_json_context, new_app

    assert observability_minimal_synth.resources("observability", "Custom::HyperPodGrafanaContent") == {}
    stack = Stack(new_app(context=cdk_json_context()), "Consumer")
    built = HyperPodObservability(
        stack, "Observability", prometheus=PrometheusConfig(), grafana=GrafanaConfig(provision_dashboards=False),
        name="team",
        eks_cluster_name="eks", eks_cluster_arn="arn:aws:eks:us-west-2:111122223333:cluster/eks",
        hyperpod_cluster_name="team", log_retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.RETAIN)
    assert built.grafana is not None and built.grafana_content is None


@pytest.mark.parametrize("source", ["https://example.com/dashboards/", "s3://bucket-without-prefix", "s3:///x/"])
def test_grafana_content_refuses_a_source_that_is_no_s3_prefix_naming_the_prop(source):
    from aws_cdk import Stack

    from infra.constructs.grafana_content import GrafanaContent
    from infra.errors import ConfigError
    from tests.conftest import new_app

    stack = Stack(new_app(), "Content")
    with pytest.raises(ConfigError, match=r"s3_source: must look like s3://<bucket>/<prefix>/") as refused:
        GrafanaContent(stack, "GrafanaContent", workspace_id="g-0123456789", workspace_endpoint="e",
                       workspace_arn="arn:aws:grafana:us-west-2:111122223333:/workspaces/g-0123456789",
                       prometheus_workspace_id="ws-1", s3_source=source)
    assert refused.value.value == source


def test_a_cluster_with_the_inference_operator_gets_the_inference_metrics_and_dashboard(all_features_synth):
    """With addons.inference_operator on, the observability add-on collects its one inference level (BASIC, the only
    one AWS's module sends: awslabs/awsome-distributed-training@0edaf152:.../modules/observability/eks_addon.tf) and
    Grafana gets AWS's inference dashboard (grafana_content.DASHBOARDS, from aws/sagemaker-hyperpod-cluster-setup@
    b920fcf4)."""
    from infra.constructs import grafana_content

    assert all_features_synth.config.addons.inference_operator.enabled
    addon = _addon(all_features_synth, "amazon-sagemaker-hyperpod-observability")
    configuration = json.loads(render(addon["ConfigurationValues"]))
    assert configuration["metricsProvider"]["inferenceMetrics"] == {"level": "BASIC", "scrapeInterval": 30}
    content = json.loads(_content(all_features_synth)["Content"])
    (inference,) = [d for d in content["dashboards"] if d["uid"] == "aws-sm-hp-observability-inference-v1_0"]
    assert inference["path"] == "dashboards/templates/inference.json"
    assert inference["sha256"] in {digest for _, _, digest in grafana_content.DASHBOARDS}
