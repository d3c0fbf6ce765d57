"""Field types the config sections share: names, AZ IDs, log retention, whole numbers, Kubernetes keys, tags,
chart versions, IAM ARNs and project paths."""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StrictInt

from infra.config.base import refusal
from infra.errors import ConfigError

# CloudWatch Logs accepts only these retention periods (days -> aws_logs.RetentionDays member).
RETENTION_DAYS: dict[int, str] = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS",
    1096: "THREE_YEARS", 1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS",
    2922: "EIGHT_YEARS", 3288: "NINE_YEARS", 3653: "TEN_YEARS",
}

# Every pattern here and in the sections spells its classes out in ASCII ([0-9], [A-Za-z0-9_]): in both regular
# expression engines the config uses (Python's re for str, pydantic-core's Rust regex) \d and \w match Unicode
# digits and letters, which AWS refuses in account IDs and names (and one such value crashed synth inside jsii).
# tests/config/test_hostile_configs.py fails on a \d, \w or \s in any of them.
Name63 = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")]
AzId = Annotated[str, Field(pattern=r"^[a-z]{2,}[0-9]+-az[0-9]+$")]
AccountId = Annotated[str, Field(pattern=r"^[0-9]{12}$")]

# The partitions' names as ARNs spell them (aws, aws-cn, aws-us-gov, aws-iso, aws-iso-b, ...).
_PARTITION = r"aws(?:-[a-z]+)*"
# IAM names and paths (https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html and
# API_CreatePolicy.html: RoleName, PolicyName [\w+=,.@-]+ -- read in ASCII, as IAM means it; Path: "/" or
# printable ASCII between slashes).
_IAM_NAME = r"[A-Za-z0-9+=,.@_-]{1,128}"
_IAM_PATH = r"/(?:[!-~]*/)?"
_ACCESS_ENTRY_PRINCIPAL = re.compile(rf"^arn:{_PARTITION}:iam::[0-9]{{12}}:(?:role|user){_IAM_PATH}{_IAM_NAME}$")


def _access_entry_principal(value: str) -> str:
    # "You can't use the STS session principal type with access entries because this is a temporary principal
    # for each session and not a permanent identity that can be assigned permissions" (botocore 1.44.8's eks
    # model, CreateAccessEntryRequest.principalArn; the same on EKS's CreateAccessEntry API page).
    if re.match(rf"^arn:{_PARTITION}:sts::", value):
        raise refusal("", value, "an STS session ARN cannot have an EKS access entry (sessions are temporary); "
                                 "name the role: arn:aws:iam::<account>:role/<name>")
    if not _ACCESS_ENTRY_PRINCIPAL.match(value):
        raise refusal("", value, "not the ARN of an IAM role or user (arn:aws:iam::<12 digits>:role/<name> or "
                                 ":user/<name>, ASCII letters, digits and +=,.@_- only)")
    return value


# An IAM principal an EKS access entry can name: a role or a user, never an STS session.
IamArn = Annotated[str, AfterValidator(_access_entry_principal)]
# A managed policy: a customer managed one of an account, or an AWS managed one (account "aws"), both valid
# permissions boundaries ("You can use an AWS managed policy or a customer managed policy to set the boundary",
# https://docs.aws.amazon.com/IAM/latest/UserGuide/access_policies_boundaries.html).
PolicyArn = Annotated[str, Field(pattern=rf"^arn:{_PARTITION}:iam::(?:[0-9]{{12}}|aws):policy{_IAM_PATH}{_IAM_NAME}$")]


def _retention_days(value: int) -> int:
    if value not in RETENTION_DAYS:
        raise refusal("", None, f"{value} days is not a CloudWatch Logs retention; use one of {sorted(RETENTION_DAYS)}")
    return value


RetentionDays = Annotated[StrictInt, AfterValidator(_retention_days)]


def _whole_number(value: Any) -> Any:
    # pydantic's lax mode reads YAML `true` as 1 and 2.0 as 2; where a number is expected either is a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise refusal("", None, f"expected a whole number, got {value!r}")
    return value


# For Literal numbers, which pydantic cannot validate strictly.
WholeNumber = BeforeValidator(_whole_number)

# Kubernetes label and taint syntax (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/,
# "Syntax and character set"): a key is an optional DNS-subdomain prefix of at most 253 characters and "/",
# then a name of 1-63 characters, alphanumeric at both ends with "-", "_", "." between; a value is empty or
# 1-63 characters of the same form.
_K8S_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _k8s_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if "/" in value and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise refusal("", None, "the prefix before '/' must be a DNS subdomain of at most 253 characters "
                                 f"(lower case, digits, '-', '.'), got {value}")
    if not _K8S_NAME.match(name):
        raise refusal("", None, "not a Kubernetes key: the name must be 1-63 characters, alphanumeric at both "
                                 f"ends with '-', '_' or '.' between, got {value}")
    return value


def _k8s_value(value: str) -> str:
    if value and not _K8S_NAME.match(value):
        raise refusal("", None, "not a Kubernetes label value: empty or 1-63 characters, alphanumeric at both "
                                 f"ends with '-', '_' or '.' between, got {value}")
    return value


K8sKey = Annotated[str, AfterValidator(_k8s_key)]
K8sValue = Annotated[str, AfterValidator(_k8s_value)]


# Tags as the CloudFormation resource schemas take them (cfn-lint's AWS::SageMaker::Cluster schema, Tag):
# key 1-128 and value 0-256 characters of Unicode letters, digits, whitespace and _ . : / = + - @, and
# neither may start with "aws:", which AWS reserves.
def _tag_text(value: str) -> str:
    if value.lower().startswith("aws:"):
        raise refusal("", None, f"the aws: prefix is reserved for AWS, got {value}")
    bad = [c for c in value if not (unicodedata.category(c)[0] in "LNZ" or c in "_.:/=+-@")]
    if bad:
        raise refusal("", value, f"tags take letters, digits, spaces and _ . : / = + - @ only, got {bad[0]!r}")
    return value


TagKey = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_tag_text)]
# The tag AWS's setups put on every HyperPod cluster and on the observability workspaces and add-on (value "true"),
# which the app writes itself (infra/constructs/hyperpod/cluster.py and infra/constructs/observability.py say why).
SAGEMAKER_TAG_KEY = "SageMaker"
TagValue = Annotated[str, Field(max_length=256), AfterValidator(_tag_text)]
# Tags per resource: 50 (maxItems of Tags in cfn-lint's AWS::SageMaker::Cluster schema, TagList max 50 in botocore's
# sagemaker model). The app puts up to APP_TAGS of its own on one resource ("project" on every one, then the cluster's
# SageMaker tag, or a subnet's Name and its ELB role or hyperpod:subnet tag; tests/config/test_hostile_configs.py
# counts them in the synthesized templates), so the config's tags get the rest.
MAX_TAGS_PER_RESOURCE = 50
APP_TAGS = 3
MAX_CONFIG_TAGS = MAX_TAGS_PER_RESOURCE - APP_TAGS

# Helm chart versions must be SemVer 2 (Helm maintainers in https://github.com/helm/helm/issues/9728; "Helm
# uses SemVer 2", https://helm.sh/docs/v2/chart_best_practices/conventions). An exact version, not a range,
# so every deploy installs the same chart. Regular expression from https://semver.org/.
_PRERELEASE_PART = r"(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
_SEMVER = (r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
           rf"(?:-({_PRERELEASE_PART}(?:\.{_PRERELEASE_PART})*))?"
           r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")
ExactVersion = Annotated[str, Field(pattern=_SEMVER)]


def script_key_problem(value: str) -> str | None:
    """Why ``value`` cannot name a script inside the lifecycle scripts folder, or None when it can.

    The script is uploaded with the folder, and OnCreate is "the file name of the entrypoint script of lifecycle
    scripts under SourceS3Uri" (ClusterLifeCycleConfig in botocore's sagemaker model), so the key is a relative
    path of names below the folder: never absolute, "~", "..", "." or an empty part, nor a Windows separator.
    Whether the file exists is checked on the folder at synth (``check_lifecycle_dir``).
    """
    parts = value.split("/")
    if value.startswith(("/", "~")) or "\\" in value or any(p in {"", ".", ".."} for p in parts):
        return "must be a relative path to a file inside hyperpod.lifecycle_scripts_dir (no leading '/' or '~', " \
               "no '.', '..' or empty parts, '/' as separator)"
    return None


def path_escapes(value: str) -> bool:
    """True when a relative path from the config could lead outside the project: absolute, ~ or '..'."""
    path = Path(value)
    return path.is_absolute() or value.startswith("~") or ".." in path.parts


def leads_out_through_links(value: str, root: Path) -> Path | None:
    """Where a relative path from the config really leads, when symbolic links on the way take it out of ``root``
    (the project: the working directory, where the CDK runs the app); None when it stays inside."""
    try:
        target = (root / value).resolve(strict=False)
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (pathlib, Python 3.11)
        return root / value
    return None if target.is_relative_to(root.resolve()) else target


def links_leaving(directory: Path) -> list[tuple[Path, str]]:
    """(link, where it leads) for each symbolic link under ``directory`` that leads outside it, in path order.

    The walk does not follow links (os.walk's default), so a link to a folder outside is reported and never
    entered. A link that cannot be resolved (a loop) counts as leaving: what it would copy is unknown.
    """
    root = directory.resolve()
    found = []
    for folder, folders, files in os.walk(root):
        for name in sorted(folders + files):
            path = Path(folder) / name
            if not path.is_symlink():
                continue
            try:
                target = path.resolve(strict=False)
            except (OSError, RuntimeError):  # RuntimeError: a symlink loop (pathlib, Python 3.11)
                found.append((path, os.readlink(path)))
                continue
            if not target.is_relative_to(root):
                found.append((path, str(target)))
    return sorted(found)


def refuse_links_leaving(key: str, directory: Path, *, allowed: bool) -> None:
    """The one rule for a folder the config names that is copied into an asset (lifecycle scripts, a local chart):
    a symbolic link in it that leads outside it is refused, unless ``hyperpod.allow_paths_outside_project`` is
    set, since the CDK copies the link's target into cdk.out and the deploy uploads it."""
    if allowed:
        return
    for link, target in links_leaving(directory):
        raise ConfigError(key, str(link), f"a symbolic link to {target}, outside {directory.resolve()}: its target "
                                          "would be copied into the asset; put the file itself there, or set "
                                          "hyperpod.allow_paths_outside_project: true")
