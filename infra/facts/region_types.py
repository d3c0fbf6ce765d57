"""Which CloudFormation resource types each feature creates, and which of them a region does not offer.

``FEATURE_RESOURCE_TYPES`` is the one table of what a config's features put into the templates (``AWS::`` types
only: a ``Custom::`` type is this app's own Lambda, offered wherever Lambda is). ``tests/config/test_region_types.py``
synthesizes the app with each feature alone and fails when the table differs from what the templates hold.

Which types a region offers is read from cfn-lint's bundled provider schemas (``cfnlint/data/schemas/providers/
<region>.json``: one key per resource type CloudFormation's registry has in that region), the data
``cfn-lint --regions <region>`` reports E3006 from. cfn-lint is a dev dependency (pinned in requirements.lock), so
the table's types a region lacks are copied into ``region_types.json`` with cfn-lint's version and the schemas'
date: the app reads that small file on every synth and needs no cfn-lint at run time. ``python -m
infra.facts.region_types`` rewrites it from the installed cfn-lint, and the same test fails when the two differ.
A region cfn-lint has no file for (cfn-lint then lints as us-east-1) is not in the file: nothing is known of it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA_FILE = Path(__file__).with_name("region_types.json")

# The key of what every config creates, whichever features are on: the region is what must change.
ALWAYS = "region"

# Config key -> the resource types it creates when on (beyond ALWAYS's). A feature that adds no type of its own
# (hyperpod.autoscaling, hyperpod.tiered_checkpointing) is absent. AWS::StepFunctions::StateMachine is the waiter of
# infra/constructs/readiness.py, built for the first add-on or resource that is waited for.
FEATURE_RESOURCE_TYPES: dict[str, tuple[str, ...]] = {
    ALWAYS: (
        "AWS::EC2::EIP", "AWS::EC2::FlowLog", "AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::Route",
        "AWS::EC2::RouteTable", "AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupEgress",
        "AWS::EC2::SecurityGroupIngress", "AWS::EC2::Subnet", "AWS::EC2::SubnetRouteTableAssociation",
        "AWS::EC2::VPC", "AWS::EC2::VPCCidrBlock", "AWS::EC2::VPCEndpoint", "AWS::EC2::VPCGatewayAttachment",
        "AWS::EKS::AccessEntry", "AWS::EKS::Addon", "AWS::EKS::Cluster", "AWS::IAM::Policy", "AWS::IAM::Role",
        "AWS::KMS::Key", "AWS::Lambda::Function", "AWS::Lambda::LayerVersion", "AWS::Logs::LogGroup",
        "AWS::S3::Bucket", "AWS::S3::BucketPolicy", "AWS::SSM::Parameter", "AWS::SageMaker::Cluster",
    ),
    "observability.container_insights": ("AWS::StepFunctions::StateMachine",),
    "observability.prometheus.enabled": ("AWS::APS::Workspace", "AWS::StepFunctions::StateMachine"),
    "observability.grafana.enabled": ("AWS::APS::Workspace", "AWS::Grafana::Workspace",
                                      "AWS::StepFunctions::StateMachine"),
    "observability.alerts.enabled": ("AWS::CloudWatch::Alarm", "AWS::Events::Rule", "AWS::SNS::Subscription",
                                     "AWS::SNS::Topic", "AWS::SNS::TopicPolicy", "AWS::StepFunctions::StateMachine"),
    "observability.dashboard": ("AWS::CloudWatch::Dashboard", "AWS::StepFunctions::StateMachine"),
    "storage.fsx_lustre.enabled": ("AWS::FSx::DataRepositoryAssociation", "AWS::FSx::FileSystem",
                                   "AWS::StepFunctions::StateMachine"),
    "addons.training_operator.enabled": ("AWS::EKS::PodIdentityAssociation", "AWS::StepFunctions::StateMachine"),
    "addons.s3_csi.enabled": ("AWS::EKS::PodIdentityAssociation", "AWS::StepFunctions::StateMachine"),
    "addons.inference_operator.enabled": ("AWS::EKS::PodIdentityAssociation", "AWS::IAM::OIDCProvider",
                                          "AWS::StepFunctions::StateMachine"),
    "addons.task_governance.enabled": ("AWS::SageMaker::ClusterSchedulerConfig", "AWS::SageMaker::ComputeQuota",
                                       "AWS::StepFunctions::StateMachine"),
}


def all_types() -> frozenset[str]:
    return frozenset(t for types in FEATURE_RESOURCE_TYPES.values() for t in types)


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return data


def unoffered(region: str) -> frozenset[str] | None:
    """The table's types ``region`` does not offer; None when cfn-lint has no data for the region."""
    missing = _data()["unoffered"].get(region)
    return None if missing is None else frozenset(missing)


def source(region: str) -> str:
    """Where ``unoffered(region)`` comes from, as a refusal names it."""
    data = _data()
    return (f"cfn-lint {data['cfn_lint']}'s bundled provider schema for {region}, schemas of "
            f"{data['schema_date'][:10]}")


def from_cfn_lint() -> dict[str, Any]:
    """The file's content as the installed cfn-lint's bundled provider schemas give it (a dev dependency)."""
    import cfnlint
    from cfnlint.version import __version__

    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    wanted = sorted(all_types())
    unoffered_types = {}
    for provider in sorted((schemas / "providers").glob("*.json")):
        if provider.stem == "sam":  # the SAM transform's types, added to every region's
            continue
        offered = json.loads(provider.read_text(encoding="utf-8"))
        unoffered_types[provider.stem] = [t for t in wanted if t not in offered]
    schema_date = json.loads((schemas / "version.json").read_text(encoding="utf-8"))["schema_date"]
    return {"cfn_lint": __version__, "schema_date": schema_date, "unoffered": unoffered_types}


if __name__ == "__main__":
    DATA_FILE.write_text(json.dumps(from_cfn_lint(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {DATA_FILE}")
