"""The inference operator's examples (render-examples with addons.inference_operator on): a JumpStartModel and an
InferenceEndpointConfig per usable GPU group, valid against the CRDs of the pinned chart, placed as each group needs."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from hpctl import cli, examples
from infra.config import parse_config
from tests.conftest import ALL_FEATURES_CONFIG, ROOT, YAML_LOADER, mutate
from tests.contract import crds

BUCKETS = ["arn:aws:s3:::example-models", "arn:aws:s3:::example-datasets"]
OPERATOR_ON: dict[str, Any] = {"addons": {"s3_csi": {"enabled": True, "bucket_arns": BUCKETS},
                                          "inference_operator": {"enabled": True}}}
GROUP = {"instance_type": "ml.g5.8xlarge", "instance_count": 1, "az_id": "usw2-az2"}


def config_with(groups: list[dict[str, Any]] | None = None, **changes: Any) -> Any:
    data = mutate(OPERATOR_ON)
    if groups is not None:
        data["hyperpod"]["instance_groups"] = groups
        if any(g.get("fallback_instance_types") for g in groups):
            data["hyperpod"]["node_provisioning_mode"] = "Continuous"
    return parse_config(mutate(changes, data), "examples")


def operator_documents(files: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    return {name: [d for d in yaml.load_all(files[name], Loader=YAML_LOADER) if d]
            for name in (examples.JUMPSTART_FILE, examples.ENDPOINT_CONFIG_FILE) if name in files}


def endpoint_spec(config: Any) -> dict[str, Any]:
    (doc,) = operator_documents(examples.render(config))[examples.ENDPOINT_CONFIG_FILE]
    spec: dict[str, Any] = doc["spec"]
    return spec


PLACEMENT = ("instanceType", "instanceTypes", "nodeAffinity")


def test_all_features_renders_both_kinds_and_every_document_is_valid_against_the_crds():
    config = parse_config(yaml.safe_load(ALL_FEATURES_CONFIG.read_text()), "examples")
    rendered = operator_documents(examples.render(config))
    assert set(rendered) == {examples.JUMPSTART_FILE, examples.ENDPOINT_CONFIG_FILE}
    for documents in rendered.values():
        assert documents
        for document in documents:
            assert document["apiVersion"] == crds.stored_version(document["kind"])
            assert crds.errors(document) == [], document["metadata"]["name"]


def test_the_operator_off_renders_neither():
    files = examples.render(parse_config(mutate({}), "examples"))
    assert not operator_documents(files)
    assert "inference.yaml" in files  # the plain vLLM Deployment is still there


def test_one_pair_per_usable_gpu_group_and_cpu_groups_are_skipped():
    config = config_with([
        {**GROUP, "name": "serve-a"},
        {**GROUP, "name": "serve-b", "instance_type": "ml.g5.xlarge"},
        {**GROUP, "name": "cpu", "instance_type": "ml.c5.xlarge"},
    ])
    rendered = operator_documents(examples.render(config))
    for documents in rendered.values():
        assert [d["spec"].get("server", d["spec"]).get("instanceType") for d in documents] == \
            ["ml.g5.8xlarge", "ml.g5.xlarge"]
        assert all(crds.errors(d) == [] for d in documents)
    names = [d["metadata"]["name"] for d in rendered[examples.ENDPOINT_CONFIG_FILE]]
    assert names == ["tinyllama-serve-a", "tinyllama-serve-b"]
    # Each registers a SageMaker endpoint of its own name, which hpctl endpoints invoke goes through.
    assert [d["spec"]["endpointName"] for d in rendered[examples.ENDPOINT_CONFIG_FILE]] == names
    jumpstart = rendered[examples.JUMPSTART_FILE]
    assert [d["spec"]["sageMakerEndpoint"]["name"] for d in jumpstart] == [d["metadata"]["name"] for d in jumpstart]


def test_a_single_type_on_demand_group_takes_instance_type():
    spec = endpoint_spec(config_with([{**GROUP, "name": "serve"}]))
    assert [k for k in PLACEMENT if k in spec] == ["instanceType"]
    assert spec["instanceType"] == "ml.g5.8xlarge"


def test_a_flexible_group_takes_the_crds_fallback_list_in_its_order():
    spec = endpoint_spec(config_with([{**GROUP, "name": "flex",
                                       "fallback_instance_types": ["ml.g5.12xlarge", "ml.g6.8xlarge"]}]))
    assert [k for k in PLACEMENT if k in spec] == ["instanceTypes"]
    assert spec["instanceTypes"] == ["ml.g5.8xlarge", "ml.g5.12xlarge", "ml.g6.8xlarge"]


def test_a_spot_group_takes_node_affinity_on_its_types_labels_and_health():
    spec = endpoint_spec(config_with([{**GROUP, "name": "spot", "capacity": "spot", "labels": {"pool": "spot-serve"},
                                       "fallback_instance_types": ["ml.g6.8xlarge"]}]))
    assert [k for k in PLACEMENT if k in spec] == ["nodeAffinity"]
    (term,) = spec["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {e["key"]: e["values"] for e in term["matchExpressions"]} == {
        "node.kubernetes.io/instance-type": ["ml.g5.8xlarge", "ml.g6.8xlarge"],
        "sagemaker.amazonaws.com/node-health-status": ["Schedulable"],
        "pool": ["spot-serve"],
    }
    assert all(e["operator"] == "In" for e in term["matchExpressions"])


def test_a_tainted_group_is_left_out_and_the_files_say_why():
    taint = {"key": "dedicated", "value": "training", "effect": "NoSchedule"}
    config = config_with([{**GROUP, "name": "train", "taints": [taint]}, {**GROUP, "name": "serve"}])
    files = examples.render(config)
    rendered = operator_documents(files)
    assert [d["metadata"]["name"] for d in rendered[examples.ENDPOINT_CONFIG_FILE]] == ["tinyllama-serve"]
    for name in rendered:
        assert "Left out: instance group train (taints dedicated: the inference CRDs have no tolerations)" \
            in files[name]
    # Only tainted GPU groups: nothing the operator could schedule, so neither file.
    assert not operator_documents(examples.render(config_with([{**GROUP, "name": "train", "taints": [taint]}])))
    # PreferNoSchedule does not keep pods away.
    soft = {**taint, "effect": "PreferNoSchedule"}
    assert operator_documents(examples.render(config_with([{**GROUP, "name": "train", "taints": [soft]}])))


def test_weights_come_from_the_first_s3_csi_bucket_in_the_cluster_region():
    spec = endpoint_spec(config_with([{**GROUP, "name": "serve"}]))
    assert spec["modelSourceConfig"] == {
        "modelSourceType": "s3", "s3Storage": {"bucketName": "example-models", "region": "us-west-2"},
        "modelLocation": examples.CUSTOM_MODEL_LOCATION,
    }


def test_weights_come_from_fsx_when_its_file_system_is_named():
    config = config_with([{**GROUP, "name": "serve"}], storage={"fsx_lustre": {"enabled": True}})
    (doc,) = operator_documents(examples.render(config, fsx_file_system_id="fs-0123456789abcdef0"))[
        examples.ENDPOINT_CONFIG_FILE]
    assert doc["spec"]["modelSourceConfig"] == {"modelSourceType": "fsx",
                                                "fsxStorage": {"fileSystemId": "fs-0123456789abcdef0"},
                                                "modelLocation": examples.CUSTOM_MODEL_LOCATION}
    assert crds.errors(doc) == []


@pytest.mark.parametrize(("region", "image"), [
    ("us-west-2", "763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"),
    ("ap-southeast-3", "907027046896.dkr.ecr.ap-southeast-3.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"),
    # Not in the registry table read: the walk-through's own registry.
    ("eu-south-2", "763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"),
])
def test_the_serving_image_is_the_regions_registry(region: str, image: str):
    assert examples.lmi_image(region) == image


def test_every_operator_region_has_a_registry_or_the_fallback():
    from infra.facts.addons import INFERENCE_OPERATOR_REGIONS
    missing = INFERENCE_OPERATOR_REGIONS - set(examples.DLC_REGISTRY_ACCOUNTS)
    assert missing == {"ap-southeast-4", "eu-south-2"}


def test_a_long_group_name_still_gives_a_valid_endpoint_name():
    config = config_with([{**GROUP, "name": "Serve-" + "x" * 57}])
    for documents in operator_documents(examples.render(config)).values():
        (doc,) = documents
        assert len(doc["metadata"]["name"]) <= examples.ENDPOINT_NAME_MAX
        assert doc["metadata"]["name"] == doc["metadata"]["name"].lower()
        assert crds.errors(doc) == []


def test_a_team_rendering_moves_the_endpoints_to_the_teams_namespace():
    from hpctl import teams
    config = config_with([{**GROUP, "name": "serve"}], addons={"task_governance": {
        "enabled": True, "teams": [{"name": "research", "quota": {"instance_type": "ml.g5.8xlarge", "count": 1}}]}})
    files = examples.render(config, where=teams.placement(config, "research", None))
    for documents in operator_documents(files).values():
        assert {d["metadata"]["namespace"] for d in documents} == {"hyperpod-ns-research"}
        assert all(crds.errors(d) == [] for d in documents)


def write_config(tmp_path: Any, changes: dict[str, Any]) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(mutate(changes, mutate(OPERATOR_ON))))
    return str(path)


def test_cli_writes_the_operator_files(tmp_path, capsys):
    code = cli.main(["render-examples", "--config", write_config(tmp_path, {}), "--out", str(tmp_path / "out")])
    assert code == 0
    assert (tmp_path / "out" / examples.JUMPSTART_FILE).is_file()
    assert (tmp_path / "out" / examples.ENDPOINT_CONFIG_FILE).is_file()


@pytest.mark.parametrize(("changes", "value", "says"), [
    ({"storage": {"fsx_lustre": {"enabled": True}}}, "fs-123", "not an FSx file system ID"),
    ({"storage": {"fsx_lustre": {"enabled": True}}}, "fs-0123456789ABCDEF0", "not an FSx file system ID"),
    ({}, "fs-0123456789abcdef0", "storage.fsx_lustre is off"),
    ({"addons": {"inference_operator": {"enabled": False}}, "storage": {"fsx_lustre": {"enabled": True}}},
     "fs-0123456789abcdef0", "addons.inference_operator is off"),
])
def test_cli_refuses_a_file_system_it_cannot_use(tmp_path, capsys, changes: dict[str, Any], value: str, says: str):
    code = cli.main(["render-examples", "--config", write_config(tmp_path, changes), "--fsx-file-system-id", value])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "--fsx-file-system-id" in err and value in err and says in err


def test_the_stored_default_rendering_has_no_operator_files():
    """config/default.yaml leaves the operator off: examples/ (kept current by test_examples.py) has neither."""
    assert not (ROOT / "examples" / examples.JUMPSTART_FILE).exists()
    assert not (ROOT / "examples" / examples.ENDPOINT_CONFIG_FILE).exists()


def test_hpctl_endpoints_reads_the_rendered_examples_back():
    """What render-examples writes is what hpctl endpoints finds the SageMaker endpoint and placement of."""
    from hpctl import endpoints

    config = config_with([{**GROUP, "name": "flex", "fallback_instance_types": ["ml.g5.12xlarge"]}])
    for documents in operator_documents(examples.render(config)).values():
        (doc,) = documents
        record = endpoints.record(doc)
        assert record["sagemaker_endpoint"] == doc["metadata"]["name"]
        assert record["state"] == "Pending"  # no status until the operator writes one
        assert record["instance_type"] in ("ml.g5.8xlarge", "ml.g5.8xlarge,ml.g5.12xlarge")
