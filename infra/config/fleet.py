"""The fleet file: the clusters one delivery pipeline deploys, in stage order, and where the pipeline gets its source.

One YAML file (``config/fleet.example.yaml``) lists each cluster with its app config file, its account and its
region; the list's order is the order of the pipeline's stages (dev before prod). It is read with the same safe
reader and validated with the same one-line errors as an app config, and each cluster's config file is loaded
and validated too (its errors name that file). Refused besides: two clusters with one project in one account
and region (their stacks, ``<project>-<component>``, would be the same stacks), a region where SageMaker is not
available (botocore's list, ``infra.facts.aws_lists``), a cluster config whose own ``account`` or ``region``
says otherwise than the fleet, and a pipeline whose region is not in the partition of every stage (one
CodePipeline cannot deploy across partitions).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator, model_validator

from infra.config.app import AppConfig, load_config
from infra.config.base import StrictModel, config_error, refusal
from infra.config.fields import AccountId
from infra.config_file import read_config_document
from infra.errors import ConfigError
from infra.facts.aws_lists import partition_of, sagemaker_regions
from infra.facts.names import cdk_lookup_role_arn

StageName = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9-]{0,39}$")]
# A CodeConnections (formerly CodeStar Connections) connection ARN: the ConnectionArn pattern of botocore's
# codeconnections/2023-12-01 service model, anchored.
# \w there is written [A-Za-z0-9_] here: config patterns are ASCII-only (docs/safety.md).
CONNECTION_ARN = (r"^arn:aws(-[A-Za-z0-9_]+)*:(codestar-connections|codeconnections):[a-z0-9\-]+:[0-9]{12}:"
                  r"connection\/[A-Za-z0-9_\-]+$")


def _known_region(value: str) -> str:
    if value not in sagemaker_regions():
        raise refusal("", None, f"{value} is not a region where SageMaker is available (per botocore)")
    return value


class ConnectionSource(StrictModel):
    """A repository behind a CodeConnections connection (GitHub, GitLab, Bitbucket)."""

    connection_arn: Annotated[str, Field(pattern=CONNECTION_ARN)]
    repository: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+$")]  # owner/name
    branch: Annotated[str, Field(min_length=1, max_length=255)] = "main"


class CodeCommitSource(StrictModel):
    """A CodeCommit repository of the pipeline's account and region."""

    repository: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,100}$")]
    branch: Annotated[str, Field(min_length=1, max_length=255)] = "main"


class S3Source(StrictModel):
    """A zip of the repository in a (versioned) bucket of the pipeline's account."""

    bucket: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")]
    key: Annotated[str, Field(min_length=1, max_length=1024)]


class PipelineSource(StrictModel):
    """Exactly one of the three."""

    connection: ConnectionSource | None = None
    codecommit: CodeCommitSource | None = None
    s3: S3Source | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> PipelineSource:
        given = [name for name in ("connection", "codecommit", "s3") if getattr(self, name) is not None]
        if len(given) != 1:
            raise refusal("", None, "give exactly one of connection, codecommit, s3 "
                          f"(got {', '.join(given) if given else 'none'})")
        return self


class PipelineConfig(StrictModel):
    name: StageName = "hyperpod-fleet"
    account: AccountId
    region: str
    source: PipelineSource

    _region = field_validator("region")(_known_region)


class FleetCluster(StrictModel):
    """One stage: a cluster's app config, deployed to ``account`` in ``region``."""

    name: StageName
    config: Annotated[str, Field(min_length=1)]
    account: AccountId
    region: str

    _region = field_validator("region")(_known_region)


class FleetConfig(StrictModel):
    pipeline: PipelineConfig
    clusters: Annotated[list[FleetCluster], Field(min_length=1, max_length=50)]

    @model_validator(mode="after")
    def _unique(self) -> FleetConfig:
        names: dict[str, int] = {}
        for i, cluster in enumerate(self.clusters):
            if cluster.name in names:
                raise refusal(f"clusters.{i}.name", cluster.name,
                              f"already the name of clusters.{names[cluster.name]}; a stage name is used once")
            names[cluster.name] = i
            if partition_of(cluster.region) != partition_of(self.pipeline.region):
                raise refusal(f"clusters.{i}.region", cluster.region,
                              f"not in the partition of pipeline.region {self.pipeline.region}; one pipeline "
                              "deploys within one partition")
        return self


@dataclass(frozen=True)
class FleetStage:
    """One stage: the fleet's entry, the cluster's validated app config (with the entry's account) and the path the
    config was read from (relative to the working directory when the fleet file's was)."""

    cluster: FleetCluster
    config: AppConfig
    config_path: str

    @property
    def assembly(self) -> str:
        """The folder of the stage's cloud assembly inside the pipeline's: its artifact ID, ``assembly-<name>`` for
        a stage that is a child of the app (aws-cdk-lib Stage.artifactId; stacks/pipeline.py checks it)."""
        return f"assembly-{self.cluster.name}"

    @property
    def lookup_role_arn(self) -> str:
        """The read-only role the pipeline's guard and preflight read this stage's environment with."""
        return cdk_lookup_role_arn(partition_of(self.cluster.region), self.cluster.account, self.cluster.region)


@dataclass(frozen=True)
class Fleet:
    """A validated fleet file and each cluster's validated app config, in stage order."""

    path: Path
    config: FleetConfig
    stages: list[FleetStage]

    @property
    def pipeline(self) -> PipelineConfig:
        return self.config.pipeline


def _cluster_config(fleet_path: Path, i: int, cluster: FleetCluster) -> FleetStage:
    """The cluster's app config with the fleet's account: the stacks of a stage are pinned to its environment."""
    path = Path(cluster.config)
    if not path.is_absolute() and (fleet_path.parent / path).is_file():
        path = fleet_path.parent / path
    key = f"clusters.{i}"
    if not path.is_file():
        raise ConfigError(f"{key}.config", cluster.config, "no such file (relative paths are read from the fleet "
                          "file's folder, then from the working directory)")
    config = load_config(path)  # its own errors name its own file
    for field in ("account", "region"):
        own, fleet = getattr(config, field), getattr(cluster, field)
        if own is not None and own != fleet:
            raise ConfigError(f"{key}.{field}", fleet, f"{path} says {field} {own}; the two must agree")
    return FleetStage(cluster, config.model_copy(update={"account": cluster.account}), path.as_posix())


def parse_fleet(data: Any, path: Path) -> Fleet:
    source = str(path)
    if not isinstance(data, dict):
        raise ConfigError("<root>", type(data).__name__, "must be a YAML mapping", source=source)
    try:
        config = FleetConfig.model_validate(data)
    except ValidationError as error:
        raise config_error(error, source) from None
    stages: list[FleetStage] = []
    where: dict[tuple[str, str, str], int] = {}
    try:
        for i, cluster in enumerate(config.clusters):
            stage = _cluster_config(path, i, cluster)
            place = (stage.config.project, cluster.account, cluster.region)
            if place in where:
                raise ConfigError(f"clusters.{i}.config", cluster.config,
                                  f"project {stage.config.project} is already clusters.{where[place]}'s in account "
                                  f"{cluster.account} region {cluster.region}: their stacks would be the same stacks; "
                                  "give one another project")
            where[place] = i
            stages.append(stage)
    except ConfigError as error:
        raise (error if error.source else error.within(source)) from None
    return Fleet(path, config, stages)


def load_fleet(path: str | Path) -> Fleet:
    """Read and validate a fleet file and every cluster config it names."""
    return parse_fleet(read_config_document(Path(path)), Path(path))
