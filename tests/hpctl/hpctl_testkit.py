"""Helpers for the hpctl tests: config data, stubbed clients, a CLI runner, fake cluster descriptions."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from hpctl import cli, preflight
from hpctl.aws import Clients

REGION = "us-west-2"
ACCOUNT = "123456789012"
CLUSTER = "hp-test"
CLUSTER_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/abc123def456"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/hp-exec"


@pytest.fixture(autouse=True)
def fake_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fake credentials, no instance metadata, no user AWS config: nothing can reach real AWS."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "HPCTL_CONFIG"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")  # much faster moto EC2 backends
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kube" / "config"))

    def no_network(request: Any, timeout: float) -> None:
        raise AssertionError(f"a test reached for the network: {request.full_url}")

    monkeypatch.setattr(preflight, "urlopen", no_network)


def config_data(**hyperpod_overrides: Any) -> dict[str, Any]:
    group = {
        "name": "workers",
        "instance_type": "ml.g5.8xlarge",
        "instance_count": 3,
        "az_id": "usw2-az2",
        "threads_per_core": 1,
        "deep_health_checks": ["InstanceStress"],
    }
    data: dict[str, Any] = {
        "project": "hp",
        "region": REGION,
        "network": {
            "control_plane_az_ids": ["usw2-az1", "usw2-az2"],
            "hyperpod_subnets": [{"az_id": "usw2-az2", "cidr": "10.1.0.0/16"}],
        },
        "eks": {"admin_principal_arns": ["arn:aws:iam::111122223333:role/PlatformAdmin"]},
        "hyperpod": {"cluster_name": CLUSTER, "instance_groups": [group]},
    }
    data["hyperpod"].update(hyperpod_overrides)
    return data


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    def write(data: dict[str, Any], name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    return write


@pytest.fixture
def config_file(write_config: Callable[..., Path]) -> Path:
    return write_config(config_data())


# Stubbed clients are lent from a pool of this process and come back after each test with their Stubber
# deactivated. botocore builds a client's class and its methods from the service model each time one is made
# (botocore/client.py: ClientCreator._create_client_class), about 20 ms for SageMaker or EC2, and these tests ask
# for about 170. A Stubber answers every call before it is signed or sent (botocore/stub.py: its before-call
# handler), so a lent client's credentials and endpoint never matter; hpctl registers nothing on a client it was
# given (hpctl/aws.py: only the clients Clients makes get the retry note).
_FREE_CLIENTS: dict[str, list[Any]] = defaultdict(list)
_LENT_CLIENTS: list[tuple[str, Any, Stubber]] = []


def stubbed(service: str) -> tuple[Any, Stubber]:
    free = _FREE_CLIENTS[service]
    client = free.pop() if free else boto3.client(service, region_name=REGION)
    stub = Stubber(client)
    stub.activate()
    _LENT_CLIENTS.append((service, client, stub))
    return client, stub


def return_stubbed_clients() -> None:
    """Deactivates the Stubbers of the clients lent so far and returns the clients to the pool."""
    while _LENT_CLIENTS:
        service, client, stub = _LENT_CLIENTS.pop()
        stub.deactivate()
        _FREE_CLIENTS[service].append(client)


@pytest.fixture(autouse=True)
def stubbed_clients_returned() -> Iterator[None]:
    yield
    return_stubbed_clients()


def described_type(type_name: str) -> dict[str, Any]:
    """CloudFormation's DescribeType answer for a public resource type (botocore's DescribeTypeOutput: Arn, Type,
    TypeName)."""
    return {"Arn": f"arn:aws:cloudformation:{REGION}::type/resource/{type_name.replace('::', '-')}",
            "Type": "RESOURCE", "TypeName": type_name}


def offer_every_type(stub: Stubber, cfg: Any) -> list[str]:
    """Stub CloudFormation to offer every resource type ``cfg`` needs, in the order preflight asks (each once)."""
    asked: list[str] = []
    for types in preflight.needed_types(cfg).values():
        for type_name in types:
            if type_name not in asked:
                asked.append(type_name)
                stub.add_response("describe_type", described_type(type_name),
                                  {"Type": "RESOURCE", "TypeName": type_name})
    return asked


def names_are_free(eks_stub: Stubber, cloudformation_stub: Stubber, stacks: list[str], project: str = "hp") -> None:
    """Stub preflight's names check (its last): no EKS cluster `<project>-eks`, no stack of those names."""
    eks_stub.add_client_error("describe_cluster", "ResourceNotFoundException", f"No cluster found for name: "
                              f"{project}-eks.", 404, expected_params={"name": f"{project}-eks"})
    for stack in stacks:
        cloudformation_stub.add_client_error("describe_stacks", "ValidationError", f"Stack with id {stack} does not "
                                             "exist", expected_params={"StackName": stack})


class Runner:
    """Runs `hpctl.cli.main` with injected clients and captures exit code, stdout and stderr."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *argv: str, clients: dict[str, Any] | None = None) -> tuple[int, str, str]:
        self.capsys.readouterr()
        make = None
        if clients is not None:
            preset = clients

            def make(region: str, profile: str | None) -> Clients:
                return Clients(region, profile, preset=preset)

        code = cli.main(list(argv), make_clients=make)
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *argv: str, clients: dict[str, Any] | None = None) -> tuple[int, Any]:
        code, out, _ = self(*argv, "--json", clients=clients)
        return code, json.loads(out)


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Runner:
    return Runner(capsys)


def cluster_description(
    status: str = "InService", groups: list[dict[str, Any]] | None = None, **extra: Any
) -> dict:
    if groups is None:
        groups = [
            {
                "InstanceGroupName": "workers",
                "InstanceType": "ml.g5.8xlarge",
                "CurrentCount": 3,
                "TargetCount": 3,
                "ThreadsPerCore": 1,
                "OnStartDeepHealthChecks": ["InstanceStress"],
                "ExecutionRole": ROLE,
                "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/scripts", "OnCreate": "on_create.sh"},
            }
        ]
    return {
        "ClusterArn": CLUSTER_ARN,
        "ClusterName": CLUSTER,
        "ClusterStatus": status,
        "InstanceGroups": groups,
        **extra,
    }


def moto_cluster(sagemaker: Any, groups: list[dict[str, Any]] | None = None, name: str = CLUSTER) -> str:
    """Create a cluster in moto (which needs s3://sagemaker- URIs and ThreadsPerCore)."""
    groups = groups or [{"InstanceGroupName": "workers", "InstanceType": "ml.g5.8xlarge", "InstanceCount": 3}]
    full = [
        {
            "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/scripts", "OnCreate": "on_create.sh"},
            "ExecutionRole": ROLE,
            "ThreadsPerCore": 1,
            "OnStartDeepHealthChecks": ["InstanceStress"],
            **g,
        }
        for g in groups
    ]
    return sagemaker.create_cluster(
        ClusterName=name,
        InstanceGroups=full,
        VpcConfig={"SecurityGroupIds": ["sg-12345678"], "Subnets": ["subnet-12345678"]},
    )["ClusterArn"]
