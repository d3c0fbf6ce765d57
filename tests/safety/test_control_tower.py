"""AWS Control Tower's proactive controls (cdklabs-cdk-validator-cfnguard 0.0.62, cfn-guard 3.1.1) over the
session's templates: the default and all-features configs, and the default with `compliance: control_tower`, fail
only the controls infra/guards/control_tower.py lists as not met by that config; a planted violation fails a synth
through the plugin stacks/validation.py registers; docs/safety.md renders the list."""

from __future__ import annotations

import json
import re
import tarfile
from functools import cache
from pathlib import Path

import jsii
import pytest
from aws_cdk import IPolicyValidationContextBeta1
from constructs import Construct

from infra.config import parse_config
from infra.errors import ConfigError
from infra.guards.control_tower import CONTROLS, disabled_rules, render_markdown
from tests.conftest import ROOT, cdk_json_context, mutate, new_app

RULES_DIR = "package/rules/control-tower/cfn-guard/"


@jsii.implements(IPolicyValidationContextBeta1)
class _Templates:
    """What the plugin is given at synth: the templates' paths (and the app, which cfn-guard does not read)."""

    def __init__(self, app, paths: list[str]) -> None:
        self._app, self._paths = app, paths

    @property
    def app_construct(self):
        return self._app

    @property
    def template_paths(self) -> list[str]:
        return self._paths


# A template the plugin is given beside the app's, with a log group no key encrypts: its finding shows that the
# plugin checked this batch of templates, so a run that reports nothing else is a pass, not a run that did not check.
SENTINEL = "ControlTowerSentinelLogGroup"


def failing_controls(synth, disabled: list[str]) -> dict[str, set[str]]:
    """Run the Control Tower plugin over ``synth``'s written templates: rule name -> the failing logical IDs."""
    from cdklabs.cdk_validator_cfnguard import CfnGuardValidator

    paths = sorted(str(p) for p in Path(synth.outdir).glob("*.template.json"))
    assert len(paths) == len(synth.templates)
    sentinel = Path(synth.outdir).parent / f"{Path(synth.outdir).name}-sentinel.json"
    sentinel.write_text(json.dumps({"Resources": {SENTINEL: {"Type": "AWS::Logs::LogGroup", "Properties": {}}}}))
    report = CfnGuardValidator(control_tower_rules_enabled=True, disabled_rules=disabled).validate(
        _Templates(synth.app.network.node.root, [*paths, str(sentinel)]))
    failing: dict[str, set[str]] = {}
    for violation in report.violations:
        failing.setdefault(violation.rule_name, set()).update(
            resource.resource_logical_id for resource in violation.violating_resources)
    assert not report.success
    assert SENTINEL in failing.get("cloudwatch_log_group_encrypted_check", set()), "the plugin checked nothing"
    failing["cloudwatch_log_group_encrypted_check"].discard(SENTINEL)
    return {rule: ids for rule, ids in failing.items() if ids}


@cache
def rule_names() -> dict[str, str]:
    """The package's Control Tower rule files: file name (what disabledRules takes) -> the rule it defines."""
    import cdklabs.cdk_validator_cfnguard as package

    (tarball,) = (Path(package.__file__).parent / "_jsii").glob("*.jsii.tgz")
    names: dict[str, str] = {}
    with tarfile.open(tarball, "r|gz") as archive:
        for member in archive:
            if member.name.startswith(RULES_DIR) and member.name.endswith(".guard"):
                text = archive.extractfile(member).read().decode()  # type: ignore[union-attr]
                (name,) = set(re.findall(r"^rule (\w+) when", text, re.MULTILINE))
                names[Path(member.name).stem] = name
    return names


def listed_off(config) -> set[str]:
    return {rule_names()[rule_file] for rule_file in disabled_rules(config)}


@pytest.mark.parametrize("variant", ["default_synth", "all_features_synth", "governed_synth",
                                     "governed_all_features_synth"])
def test_a_config_fails_only_the_controls_listed_as_not_met_by_it(variant, request):
    """One run with every control on: what fails is a subset of what the list turns off for that config, so the
    gate (`make lint`, the same plugin less the listed controls) passes and no control is off unlisted."""
    synth = request.getfixturevalue(variant)
    failing = failing_controls(synth, disabled=[])
    assert set(failing) <= listed_off(synth.config), {k: v for k, v in failing.items()
                                                      if k not in listed_off(synth.config)}
    if variant in ("default_synth", "governed_synth"):
        # The list is not stale: every control it turns off for these configs fails there.
        assert set(failing) == listed_off(synth.config)
    if variant == "governed_synth":
        # The switch alone leaves only the access-log bucket's controls, which S3's rules for a log destination
        # keep from any bucket the app could create.
        assert failing == {rule: {"LifecycleScriptsAccessLogs486B0B7F"} for rule in (
            "s3_bucket_logging_enabled_check", "s3_bucket_object_lock_enabled_check",
            "s3_bucket_default_encryption_kms_check")}
    if variant == "governed_all_features_synth":
        # The switch with access_logs_bucket: every control of the package holds, none is off.
        assert synth.config.access_logs_bucket and failing == {} and listed_off(synth.config) == set()


def test_the_defaults_meet_the_cheap_controls(default_synth):
    """Log groups encrypted with a key of their own stack, every key denying grants not for AWS resources, the
    lifecycle bucket on SSE-KMS with a noncurrent-version rule and access logs, no ACLs: none of these controls is
    in the list, and each has resources here that it checks."""
    met = {"cloudwatch_log_group_encrypted_check", "kms_create_grant_aws_service_check",
           "s3_version_lifecycle_policy_check", "s3_lifecycle_policy_check", "s3_bucket_acl_prohibited_check"}
    assert not met & {rule_names()[c.rule_file] for c in CONTROLS}
    types = {r["Type"] for t in default_synth.templates.values() for r in t["Resources"].values()}
    assert {"AWS::Logs::LogGroup", "AWS::KMS::Key", "AWS::S3::Bucket"} <= types
    for name, template in default_synth.templates.items():
        keys = {k for k, r in template["Resources"].items() if r["Type"] == "AWS::KMS::Key"}
        for logical_id, group in template["Resources"].items():
            if group["Type"] == "AWS::Logs::LogGroup":
                assert group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0] in keys, (name, logical_id)
    bucket = default_synth.resources("hyperpod", "AWS::S3::Bucket")
    lifecycle = next(b for k, b in bucket.items() if k.startswith("LifecycleScriptsBucket"))
    (sse,) = lifecycle["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert sse["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms"}
    assert "LoggingConfiguration" in lifecycle["Properties"]
    assert "ObjectLockEnabled" not in lifecycle["Properties"]


def test_the_switch_logs_and_traces_the_readiness_waiter(governed_synth, default_synth):
    """CT.STEPFUNCTIONS.PR.1/.2: the waiter logs to a retained log group of its stack, encrypted with the stack's
    logs key, and is traced; its role may deliver logs and traces. Without the switch it does neither."""
    for synth, governed in ((governed_synth, True), (default_synth, False)):
        resources = synth.template("hyperpod")["Resources"]
        (machine,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
        if not governed:
            assert "LoggingConfiguration" not in machine and "TracingConfiguration" not in machine
            continue
        assert machine["TracingConfiguration"] == {"Enabled": True}
        logging = machine["LoggingConfiguration"]
        assert logging["Level"] == "ALL" and logging["IncludeExecutionData"] is False
        ((group_id, _),) = [d["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"] for d in logging["Destinations"]]
        group = resources[group_id]
        assert group["DeletionPolicy"] == "Retain" and resources[group["Properties"]["KmsKeyId"]["Fn::GetAtt"][0]][
            "Type"] == "AWS::KMS::Key"
        actions = {a for r in resources.values() if r["Type"] == "AWS::IAM::Policy"
                   for st in r["Properties"]["PolicyDocument"]["Statement"] for a in
                   ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])}
        assert {"xray:PutTraceSegments", "logs:CreateLogDelivery"} <= actions


def _without_vpc_placement(resources: dict) -> dict:
    """``resources`` less what placing the functions in the VPC adds (test_the_switch_puts_every_function_in_
    the_vpc): their VpcConfig, the subnet parameters and security group, and the VPC access statements and the
    policies that hold only those."""
    resources = json.loads(json.dumps(resources))
    dropped = set()
    for logical_id, resource in list(resources.items()):
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::Lambda::Function":
            properties.pop("VpcConfig", None)
        if resource["Type"] == "AWS::IAM::Policy":
            statements = properties["PolicyDocument"]["Statement"]
            statements[:] = [st for st in statements if st.get("Sid") != "LambdaVpcAccess"]
            if not statements:
                dropped.add(logical_id)
        if logical_id.startswith(("NetworkDeployTimeSubnet", "DeployTimeFunctions")):
            dropped.add(logical_id)
    for logical_id in dropped:
        resources.pop(logical_id)
    for resource in resources.values():
        if "DependsOn" in resource:
            resource["DependsOn"] = [d for d in resource["DependsOn"] if d not in dropped]
            if not resource["DependsOn"]:
                resource.pop("DependsOn")
    return resources


def test_the_switch_turns_on_object_lock_event_notifications_the_waiters_logs_and_vpc_placement_and_nothing_else(
        governed_synth, default_synth):
    buckets = governed_synth.resources("hyperpod", "AWS::S3::Bucket")
    assert len(buckets) == 2
    for logical_id, bucket in buckets.items():
        assert bucket["Properties"]["NotificationConfiguration"] == {
            "EventBridgeConfiguration": {"EventBridgeEnabled": True}}, logical_id
        # Object Lock on the scripts' bucket only: S3 refuses a locked bucket as an access log destination.
        assert bucket["Properties"].get("ObjectLockEnabled") is (None if "AccessLogs" in logical_id else True)
    assert set(governed_synth.templates) == set(default_synth.templates)
    for name, template in governed_synth.templates.items():
        resources = _without_vpc_placement(template["Resources"])
        for logical_id in list(resources):
            bucket = resources[logical_id]
            if bucket["Type"] == "AWS::S3::Bucket":
                bucket["Properties"].pop("NotificationConfiguration")
                bucket["Properties"].pop("ObjectLockEnabled", None)
            # The readiness waiter's logging and tracing (test_the_switch_logs_and_traces_the_readiness_waiter).
            if bucket["Type"] == "AWS::StepFunctions::StateMachine":
                bucket["Properties"].pop("LoggingConfiguration")
                bucket["Properties"].pop("TracingConfiguration")
            if "WaiterLogs" in logical_id or "waiterstatemachineRoleDefaultPolicy" in logical_id:
                resources.pop(logical_id)
        expected = {k: v for k, v in _without_vpc_placement(default_synth.templates[name]["Resources"]).items()
                    if "waiterstatemachineRoleDefaultPolicy" not in k}
        assert resources == expected, name


def _role_actions(resources: dict, role_logical_id: str) -> set[str]:
    """The actions the inline and attached policies of the template give the role."""
    actions: set[str] = set()
    for resource in resources.values():
        if resource["Type"] != "AWS::IAM::Policy" or {"Ref": role_logical_id} not in resource["Properties"]["Roles"]:
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            action = statement["Action"]
            actions.update([action] if isinstance(action, str) else action)
    return actions


@pytest.mark.parametrize("variant", ["governed_synth", "governed_all_features_synth"])
def test_the_switch_puts_every_function_in_the_vpc(variant, request):
    """CT.LAMBDA.PR.3: every function runs in two control-plane subnets that its template names by SSM dynamic
    references to parameters of the network stack holding those subnets, with a security group of its own stack;
    its role may attach it; no template needs more than CloudFormation's 60 dynamic references."""
    from infra.constructs.function_placement import LAMBDA_VPC_ACCESS_ACTIONS, MAX_DYNAMIC_REFERENCES

    synth = request.getfixturevalue(variant)
    network = synth.template("network")["Resources"]
    parameters = {r["Properties"]["Name"]: r["Properties"]["Value"] for r in network.values()
                  if r["Type"] == "AWS::SSM::Parameter"}
    assert len(parameters) == 2
    private = {k for k, r in network.items() if r["Type"] == "AWS::EC2::Subnet"
               and r["Properties"].get("MapPublicIpOnLaunch") is not True and "Private" in k}
    assert {v["Ref"] for v in parameters.values()} <= private
    expected_ids = [f"{{{{resolve:ssm:{name}}}}}" for name in sorted(parameters)]
    placed = 0
    for name, template in synth.templates.items():
        resources = template["Resources"]
        assert json.dumps(template).count("{{resolve:") <= MAX_DYNAMIC_REFERENCES, name
        for logical_id, function in resources.items():
            if function["Type"] != "AWS::Lambda::Function":
                continue
            placed += 1
            vpc = function["Properties"]["VpcConfig"]
            assert vpc["SubnetIds"] == expected_ids, (name, logical_id)
            (group,) = vpc["SecurityGroupIds"]
            assert resources[group["Fn::GetAtt"][0]]["Type"] == "AWS::EC2::SecurityGroup", (name, logical_id)
            role = function["Properties"]["Role"]["Fn::GetAtt"][0]
            assert set(LAMBDA_VPC_ACCESS_ACTIONS) <= _role_actions(resources, role), (name, logical_id)
            if not group["Fn::GetAtt"][0].startswith("DeployTimeFunctions"):
                continue  # a chart installer: in the VPC with or without the switch, its group and role its own
            # The actions come from a policy of their own that the function waits for, so turning the switch off
            # deletes them in the cleanup phase, after the function has left the VPC.
            (policy_id,) = [d for d in function["DependsOn"] if resources[d]["Type"] == "AWS::IAM::Policy"
                            and resources[d]["Properties"]["PolicyName"] == "LambdaVpcAccess"]
            policy = resources[policy_id]["Properties"]
            assert policy["Roles"] == [{"Ref": role}], (name, logical_id)
            (statement,) = policy["PolicyDocument"]["Statement"]
            assert sorted(statement["Action"]) == sorted(LAMBDA_VPC_ACCESS_ACTIONS) and statement["Resource"] == "*"
            assert all(st.get("Sid") != "LambdaVpcAccess" for k, r in resources.items() if k != policy_id
                       and r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
                       for st in r["Properties"]["PolicyDocument"]["Statement"]), (name, logical_id)
    assert placed >= (10 if variant == "governed_synth" else 20)
    # The functions' own group lets HTTPS out and nothing in.
    (group,) = [r for k, r in synth.template("hyperpod")["Resources"].items()
                if k.startswith("DeployTimeFunctions") and r["Type"] == "AWS::EC2::SecurityGroup"]
    assert group["Properties"]["SecurityGroupEgress"] == [
        {"CidrIp": "0.0.0.0/0", "Description": "AWS APIs, CloudFormation", "FromPort": 443, "IpProtocol": "tcp",
         "ToPort": 443}]
    assert "SecurityGroupIngress" not in group["Properties"]


def test_a_stack_over_the_dynamic_reference_limit_is_refused():
    from aws_cdk import App, Stack
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_lambda as lambda_

    from infra.constructs.function_placement import place_functions_in_vpc

    stack = Stack(App(), "Crowded")
    for i in range(31):
        lambda_.Function(stack, f"F{i}", runtime=lambda_.Runtime.PYTHON_3_13, handler="index.handler",
                         code=lambda_.Code.from_inline("def handler(event, context): pass"))
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["a"])
    from aws_cdk import aws_ssm as ssm

    # As HyperPodNetwork.deploy_time_subnet_ids hands them over: tokens of SSM dynamic references.
    ids = [ssm.StringParameter.from_string_parameter_attributes(stack, name, parameter_name=name,
                                                               force_dynamic_reference=True).string_value
           for name in ("/a", "/b")]
    with pytest.raises(ConfigError, match=r"compliance.*Crowded has 31 Lambda functions.*62 SSM dynamic references"):
        place_functions_in_vpc(stack, [stack], vpc=vpc, subnet_ids=ids)


def test_the_switch_refuses_a_public_endpoint():
    data = mutate({"compliance": "control_tower",
                   "eks": {"endpoint": "public_and_private", "public_access_cidrs": ["203.0.113.0/24"]}})
    with pytest.raises(ConfigError, match=r"eks\.endpoint.*CT\.EKS\.PR\.1"):
        parse_config(data)


def test_each_listed_control_names_a_rule_file_of_the_package():
    names = rule_names()
    assert len(names) > 200  # the package's whole Control Tower set, not an empty extraction
    for control in CONTROLS:
        assert control.rule_file in names, control.rule_file
        # The identifier the list shows is the one the rule's message gives.
        assert control.control_id == "CT." + control.rule_file.removeprefix("ct-").upper().replace("-", "."), \
            control.rule_file


def test_a_planted_violation_fails_the_synth_through_the_registered_plugin(tmp_path):
    """A log group without a key, in an app given the plugin as app.py gives it for `make lint`: the synth fails
    and the report names the control. The gate cannot pass by not running."""
    from aws_cdk import Stack
    from aws_cdk import aws_logs as logs

    from stacks import validation

    config = parse_config(mutate({}))
    app = new_app(context=cdk_json_context(), outdir=str(tmp_path))
    validation.register_control_tower(app, config)
    logs.LogGroup(Stack(app, "Planted"), "Unencrypted")
    with pytest.raises(Exception, match=r"ValidationFailed.*CT\.CLOUDWATCH\.PR\.3"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    (guard,) = [p for p in report["pluginReports"] if p["pluginName"] == "cdk-validator-cfnguard"]
    assert [v["ruleName"] for v in guard["violations"]] == ["cloudwatch_log_group_encrypted_check"]


def test_app_py_registers_the_plugin_only_when_asked():
    """`make lint` asks with -c control_tower_controls=true; a plain synth does not run it (docs/bench.md)."""
    from aws_cdk import App

    from stacks import validation

    assert not validation.control_tower_requested(App())
    assert validation.control_tower_requested(App(context={validation.CONTROL_TOWER_CONTEXT: "true"}))
    assert "control_tower_controls=true" in (ROOT / "Makefile").read_text()


def test_safety_md_renders_the_list():
    text = (ROOT / "docs" / "safety.md").read_text()
    start, end = "<!-- control-tower-controls:start -->\n", "\n<!-- control-tower-controls:end -->"
    assert text[text.index(start) + len(start):text.index(end)] == render_markdown()


def test_access_logs_bucket_takes_the_place_of_the_apps_log_bucket(governed_all_features_synth, governed_synth):
    """With access_logs_bucket the app creates no log bucket: the lifecycle and inference TLS buckets log to the
    named one, and synth gives no warning for the destination policy it cannot write. Without it the app's own
    log bucket receives the logs."""
    name = governed_all_features_synth.config.access_logs_bucket
    buckets = governed_all_features_synth.resources("hyperpod", "AWS::S3::Bucket")
    assert sorted(k[:20] for k in buckets) == ["InferenceOperatorTls", "LifecycleScriptsBuck"]
    for logical_id, bucket in buckets.items():
        assert bucket["Properties"]["LoggingConfiguration"]["DestinationBucketName"] == name, logical_id
    from aws_cdk.assertions import Annotations, Match

    warnings = Annotations.from_stack(governed_all_features_synth.app.hyperpod).find_warning(
        "*", Match.string_like_regexp("logging permissions"))
    assert not warnings, warnings
    own = governed_synth.resources("hyperpod", "AWS::S3::Bucket")
    (lifecycle,) = [b for k, b in own.items() if k.startswith("LifecycleScriptsBucket")]
    assert lifecycle["Properties"]["LoggingConfiguration"]["DestinationBucketName"] == {
        "Ref": "LifecycleScriptsAccessLogs486B0B7F"}


def test_access_logs_bucket_must_be_a_bucket_name():
    with pytest.raises(ConfigError, match=r"access_logs_bucket.*pattern"):
        parse_config(mutate({"access_logs_bucket": "arn:aws:s3:::logs"}))


def test_deploy_time_subnets_are_named_as_each_stack_may_name_them():
    """The network's own stack and a VPC adopted by ID name the subnets as they are; another stack by SSM
    dynamic references to parameters made once in the network's stack, and waits for it."""
    from aws_cdk import App, Stack, Token

    from infra.constructs.network import HyperPodNetwork

    app = App()
    network_stack, other = Stack(app, "Net"), Stack(app, "Other")
    network = HyperPodNetwork(network_stack, "Network", vpc_cidr="10.0.0.0/16",
                              control_plane_az_ids=["usw2-az1", "usw2-az2", "usw2-az3"])
    same = network.deploy_time_subnet_ids(network_stack)
    assert len(same) == 2 and all(Token.is_unresolved(i) for i in same)
    assert network.node.try_find_child("DeployTimeSubnet0") is None
    names = ["{{resolve:ssm:/Net/deploy-time-subnet-0}}", "{{resolve:ssm:/Net/deploy-time-subnet-1}}"]
    assert other.resolve(network.deploy_time_subnet_ids(other)) == names
    assert other.resolve(network.deploy_time_subnet_ids(Construct(other, "Again"))) == names
    assert [c.node.id for c in network.node.children if c.node.id.startswith("DeployTimeSubnet")] == [
        "DeployTimeSubnet0", "DeployTimeSubnet1"]
    assert network_stack in other.dependencies
    adopted = HyperPodNetwork(Stack(app, "Adopted"), "Network", existing_vpc_id="vpc-0123456789abcdef0",
                              control_plane_az_ids=["usw2-az1", "usw2-az2"],
                              control_plane_subnet_ids=["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
                              hyperpod_subnet_ids={"usw2-az1": "subnet-0cccccccccccccccc"})
    assert adopted.deploy_time_subnet_ids(other) == ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]


def test_the_switch_without_access_logs_bucket_warns_at_synth(governed_synth, default_synth,
                                                               governed_all_features_synth):
    """The controls `make lint` leaves out for the switch alone are said at synth, on the app's own log bucket,
    with the key that meets them; neither the defaults nor the switch with access_logs_bucket warn."""
    from aws_cdk.assertions import Annotations, Match

    def warnings(synth):
        return Annotations.from_stack(synth.app.hyperpod).find_warning(
            "*", Match.string_like_regexp("compliance: control_tower: this access log bucket"))

    (warning,) = warnings(governed_synth)
    assert warning.id.endswith("/LifecycleScripts/AccessLogs"), warning.id
    assert "CT.S3.PR.2, CT.S3.PR.9, CT.S3.PR.10" in warning.entry.data and "access_logs_bucket" in warning.entry.data
    assert listed_off(governed_synth.config) == {rule_names()[f] for f in ("ct-s3-pr-2", "ct-s3-pr-9", "ct-s3-pr-10")}
    assert not warnings(default_synth) and not warnings(governed_all_features_synth)
