"""The apps whose stateful resources must survive an upgrade of this code: the app's default config, the
fuller variant, the variant with shared storage, and the consumer example built from the library."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.config import parse_config
from tests.conftest import (
    VARIANT_CHANGES,
    default_config_data,
    fsx_config_data,
    mutate,
    synthesize,
    synthesize_consumer,
)

# Data-bearing or identity-bearing resources: a new logical ID for any of these means CloudFormation creates
# a new one and deletes (or, when retained, orphans) the old one.
STATEFUL_TYPES = (
    "AWS::EC2::VPC",
    "AWS::EC2::VPCCidrBlock",
    "AWS::EC2::Subnet",
    "AWS::EC2::SecurityGroup",
    "AWS::EKS::Cluster",
    "AWS::SageMaker::Cluster",
    "AWS::S3::Bucket",
    "AWS::KMS::Key",
    "AWS::Logs::LogGroup",
    "AWS::APS::Workspace",
    "AWS::Grafana::Workspace",
    "AWS::FSx::FileSystem",
)

Templates = dict[str, dict[str, Any]]


def _config_app(name: str, data: dict[str, Any]) -> Callable[[Path], Templates]:
    def build(outdir: Path) -> Templates:
        return synthesize(parse_config(data, name), outdir).templates
    return build


VARIANTS: dict[str, Callable[[Path], Templates]] = {
    "default": _config_app("default", default_config_data()),
    "variant": _config_app("variant", mutate(VARIANT_CHANGES)),
    "fsx": _config_app("fsx", fsx_config_data()),
    "consumer": lambda outdir: synthesize_consumer(outdir)[0],
}
