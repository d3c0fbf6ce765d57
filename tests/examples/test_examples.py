"""The data-scientist manifests: what HyperPod, the training operator and the cluster need; examples/ is current."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpctl import cli, examples
from infra.config import cluster_instance_types, parse_config
from infra.facts.instances import lookup
from tests.conftest import ROOT, YAML_LOADER, default_config_data, fsx_config_data, mutate

EXAMPLES_DIR = ROOT / "examples"
NAMESPACED = {"ConfigMap", "PyTorchJob", "Deployment", "Service", "MPIJob"}


def documents(files: dict[str, str]) -> list[dict[str, Any]]:
    return [doc for text in files.values() for doc in yaml.load_all(text, Loader=YAML_LOADER) if doc is not None]


def by_kind(files: dict[str, str], kind: str) -> dict[str, Any]:
    (doc,) = [d for d in documents(files) if d["kind"] == kind]
    return doc


def pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if doc["kind"] == "PyTorchJob":
        return [r["template"]["spec"] for r in doc["spec"]["pytorchReplicaSpecs"].values()]
    if doc["kind"] == "MPIJob":
        return [r["template"]["spec"] for r in doc["spec"]["mpiReplicaSpecs"].values()]
    return [doc["spec"]["template"]["spec"]]


def counted(instance_type: str) -> tuple[int, int]:
    """The instance catalog's GPUs and EFA devices of ``instance_type``, both counted there."""
    known = lookup(instance_type)
    assert known is not None and known.gpus is not None and known.efa is not None, instance_type
    return known.gpus, known.efa


def render(changes: dict[str, Any] | None = None, data: dict[str, Any] | None = None) -> dict[str, str]:
    config = parse_config(data if data is not None else mutate(changes or {}), "examples")
    return examples.render(config)


@pytest.fixture(scope="module")
def default_files() -> dict[str, str]:
    return render()


@pytest.fixture(scope="module")
def fsx_files() -> dict[str, str]:
    return render(data=fsx_config_data())


# Two p4d nodes with a taint: multi-node rendezvous, several EFA devices, tolerations.
MULTI_NODE = {"hyperpod": {"instance_groups": [{
    "name": "p4d-workers", "instance_type": "ml.p4d.24xlarge", "instance_count": 2, "az_id": "usw2-az2",
    "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
}]}}


# An S3 bucket through the Mountpoint CSI driver: a volume that outlives the pods, so the auto-resume job renders.
S3_CHECKPOINTS = {"addons": {"s3_csi": {"enabled": True, "bucket_arns": ["arn:aws:s3:::team-data"]}}}


@pytest.fixture(scope="module")
def multi_node_files() -> dict[str, str]:
    return render({**MULTI_NODE, **S3_CHECKPOINTS})


def test_examples_directory_is_the_rendering_of_the_default_config(default_files):
    stale = f"examples/ is stale: regenerate with `.venv/bin/python -m {examples.REGENERATE}` and commit it"
    on_disk = {p.name: p.read_text() for p in EXAMPLES_DIR.glob("*.yaml")}
    assert sorted(on_disk) == sorted(default_files), stale
    for name, text in default_files.items():
        assert on_disk[name] == text, f"{name}: {stale}"


@pytest.mark.parametrize("variant", ["default_files", "fsx_files", "multi_node_files"])
def test_the_fast_loader_reads_the_manifests_as_the_pure_python_one_does(request, variant):
    """documents() parses with LibYAML where PyYAML has it; a kubectl-bound manifest must read the same."""
    files = request.getfixturevalue(variant)
    pure = [doc for text in files.values() for doc in yaml.safe_load_all(text) if doc is not None]
    assert documents(files) == pure


@pytest.mark.parametrize("variant", ["default_files", "fsx_files", "multi_node_files"])
def test_every_manifest_is_a_kubernetes_object(request, variant):
    files = request.getfixturevalue(variant)
    docs = documents(files)
    expected = {"PyTorchJob", "Deployment", "Service", "MPIJob", "ConfigMap"}
    if variant == "default_files":  # no volume outlives the pods: no auto-resume job (and its script)
        expected -= {"PyTorchJob", "ConfigMap"}
    assert {d["kind"] for d in docs} >= expected
    for doc in docs:
        assert isinstance(doc["apiVersion"], str) and "/" in doc["apiVersion"] or doc["apiVersion"] == "v1"
        assert doc["metadata"]["name"]
        if doc["kind"] in NAMESPACED:
            assert doc["metadata"]["namespace"] == "ml-team" if variant == "fsx_files" else "training"
        assert "spec" in doc or "data" in doc or doc["kind"] == "Namespace"


def test_training_job_asks_for_auto_resume_with_both_annotations(fsx_files):
    job = by_kind(fsx_files, "PyTorchJob")
    assert job["apiVersion"] == "kubeflow.org/v1"
    annotations = job["metadata"]["annotations"]
    assert annotations["sagemaker.amazonaws.com/enable-job-auto-resume"] == "true"
    assert annotations["sagemaker.amazonaws.com/job-max-retry-count"] == str(examples.JOB_MAX_RETRY_COUNT)
    assert int(annotations["sagemaker.amazonaws.com/job-max-retry-count"]) >= 1
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        assert replica["restartPolicy"] == "OnFailure"


@pytest.mark.parametrize("variant", ["default_files", "multi_node_files"])
def test_gpu_pods_go_to_healthy_nodes_of_the_group_type_with_its_gpus_and_efa(request, variant):
    files = request.getfixturevalue(variant)
    instance_type = "ml.p4d.24xlarge" if variant == "multi_node_files" else "ml.g5.8xlarge"
    gpus, efa = counted(instance_type)
    for kind in ("PyTorchJob", "Deployment", "MPIJob"):
        if kind == "PyTorchJob" and variant == "default_files":
            continue  # not rendered: no volume outlives the pods
        doc = by_kind(files, kind)
        gpu_pods = [s for s in pod_specs(doc) if "nvidia.com/gpu" in s["containers"][0].get("resources", {}).get(
            "limits", {})]
        assert gpu_pods, kind
        for spec in gpu_pods:
            assert spec["nodeSelector"] == {
                "sagemaker.amazonaws.com/node-health-status": "Schedulable",
                "node.kubernetes.io/instance-type": instance_type,
            }
            resources = spec["containers"][0]["resources"]
            assert resources["requests"] == resources["limits"]
            wanted_gpus = 1 if kind == "Deployment" else gpus
            assert resources["limits"]["nvidia.com/gpu"] == wanted_gpus
            if kind != "Deployment":
                assert resources["limits"].get("vpc.amazonaws.com/efa", 0) == efa


def test_instance_type_without_efa_asks_for_none():
    data = default_config_data()
    data["hyperpod"]["instance_groups"][0]["instance_type"] = "ml.g5.2xlarge"
    files = render(data={**data, **S3_CHECKPOINTS})
    assert counted("ml.g5.2xlarge") == (1, 0)
    for kind in ("PyTorchJob", "MPIJob"):
        for spec in pod_specs(by_kind(files, kind)):
            assert "vpc.amazonaws.com/efa" not in spec["containers"][0].get("resources", {}).get("limits", {})
            assert "FI_PROVIDER" not in yaml.safe_dump(spec)


def test_torchrun_uses_c10d_with_one_process_per_gpu_on_every_node(multi_node_files):
    job = by_kind(multi_node_files, "PyTorchJob")
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] + replicas["Worker"]["replicas"] == 2
    command = replicas["Master"]["template"]["spec"]["containers"][0]["command"]
    assert command[0] == "torchrun"
    assert "--rdzv-backend=c10d" in command
    assert "--nproc-per-node=8" in command and "--nnodes=2" in command
    assert "--rdzv-endpoint=$(MASTER_ADDR):$(MASTER_PORT)" in command
    assert replicas["Master"]["template"]["spec"]["containers"][0]["name"] == "pytorch"


def test_taints_of_the_group_become_tolerations(multi_node_files):
    for kind in ("PyTorchJob", "Deployment", "MPIJob"):
        gpu_specs = [s for s in pod_specs(by_kind(multi_node_files, kind)) if "tolerations" in s]
        assert gpu_specs, kind
        for spec in gpu_specs:
            assert spec["tolerations"] == [
                {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]


def test_checkpoints_go_to_the_claim_the_storage_stack_creates(fsx_files):
    fsx = parse_config(fsx_config_data()).storage.fsx_lustre
    job = by_kind(fsx_files, "PyTorchJob")
    assert job["metadata"]["namespace"] == fsx.namespace
    for spec in pod_specs(job):
        (shared,) = [v for v in spec["volumes"] if v["name"] == "shared"]
        assert shared == {"name": "shared", "persistentVolumeClaim": {"claimName": fsx.pvc_name}}
        env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
        mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        assert env["CHECKPOINT_DIR"].startswith(mounts["shared"] + "/")
    inference = by_kind(fsx_files, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "shared", "persistentVolumeClaim": {"claimName": fsx.pvc_name}} in inference["volumes"]
    assert "namespace.yaml" not in fsx_files  # the storage chart creates the namespace


def test_without_a_volume_that_outlives_the_pods_there_is_no_auto_resume_job(default_files):
    """The default config has no FSx and no S3 driver: a checkpoint in an emptyDir dies with the pod, so an
    auto-resume job would restart from step 0. It is left out, and render-examples says why."""
    assert examples.TRAINING_FILE not in default_files
    assert "emptyDir: {}" not in examples.stream(default_files)
    assert "namespace.yaml" in default_files
    reason = examples.training_refusal(parse_config(default_config_data()))
    assert reason is not None and "storage.fsx_lustre" in reason and "addons.s3_csi" in reason
    assert examples.training_refusal(parse_config(fsx_config_data())) is None


def test_inference_service_selects_the_deployment_pods(default_files):
    deployment, service = by_kind(default_files, "Deployment"), by_kind(default_files, "Service")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels
    assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
    port_names = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names


def test_smoke_test_runs_nccl_across_two_nodes_and_checks_gpus_and_efa(default_files):
    job = by_kind(default_files, "MPIJob")
    assert job["apiVersion"] == "kubeflow.org/v2beta1"
    specs = job["spec"]["mpiReplicaSpecs"]
    assert specs["Worker"]["replicas"] == 2
    gpus, _ = counted("ml.g5.8xlarge")
    assert job["spec"]["slotsPerWorker"] == gpus
    script = specs["Launcher"]["template"]["spec"]["containers"][0]["args"][0]
    assert "nvidia-smi" in script and "fi_info -p efa" in script
    assert f"-np {2 * gpus} -N {gpus}" in script and "all_reduce_perf" in script
    assert "It needs 2 nodes" in default_files["nccl-smoke-test.yaml"]  # the default group has one


def test_images_are_pinned():
    for image in (examples.TRAINING_IMAGE, examples.NCCL_TESTS_IMAGE, examples.INFERENCE_IMAGE):
        name, _, tag = image.rpartition(":")
        assert name and tag and tag != "latest", image


def test_cli_writes_the_rendering_and_exits_0(tmp_path, capsys):
    code = cli.main(["render-examples", "--config", str(ROOT / "config" / "default.yaml"), "--out", str(tmp_path)])
    assert code == 0
    written = {p.name: p.read_text() for p in tmp_path.iterdir()}
    expected = examples.render(parse_config(default_config_data()))
    assert written == expected
    assert "wrote" in capsys.readouterr().out


def test_training_job_checkpoints_at_the_interval_it_is_given(tmp_path, capsys):
    default = by_kind(render(S3_CHECKPOINTS), "PyTorchJob")
    for spec in pod_specs(default):
        env = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
        assert env["CHECKPOINT_INTERVAL_MINUTES"] == f"{examples.CHECKPOINT_INTERVAL_MINUTES:g}"
    assert 'os.environ["CHECKPOINT_INTERVAL_MINUTES"]' in examples.TRAIN_SCRIPT
    compile(examples.TRAIN_SCRIPT, "train.py", "exec")
    config = tmp_path / "fsx.yaml"
    config.write_text(yaml.safe_dump(fsx_config_data()))
    code = cli.main(["render-examples", "--config", str(config), "--out", str(tmp_path),
                     "--checkpoint-interval-minutes", "91.5"])
    assert code == 0
    job = by_kind({"f": (tmp_path / "pytorchjob-auto-resume.yaml").read_text()}, "PyTorchJob")
    for spec in pod_specs(job):
        assert {"name": "CHECKPOINT_INTERVAL_MINUTES", "value": "91.5"} in spec["containers"][0]["env"]


@pytest.mark.parametrize("minutes", ["0", "-3", "nan"])
def test_cli_refuses_a_checkpoint_interval_that_is_not_positive(tmp_path, capsys, minutes):
    code = cli.main(["render-examples", "--config", str(ROOT / "config" / "default.yaml"), "--out", str(tmp_path / "o"),
                     "--checkpoint-interval-minutes", minutes])
    assert code == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_cli_refuses_a_config_without_gpu_groups_with_exit_2(tmp_path, capsys):
    data = default_config_data()
    data["hyperpod"]["instance_groups"][0].update(instance_type="ml.m5.2xlarge", deep_health_checks=[])
    config = tmp_path / "cpu.yaml"
    config.write_text(yaml.safe_dump(data))
    code = cli.main(["render-examples", "--config", str(config), "--out", str(tmp_path / "out")])
    assert code == 2
    assert "no instance group with NVIDIA GPUs" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# --- the smoke test really proves EFA; the table covers HyperPod's accelerated types ----------------------------


def _efa_checks(files: dict[str, str], log: Path) -> str:
    """The launcher script's checks of the NCCL log, pointed at `log`."""
    script = by_kind(files, "MPIJob")["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0][
        "args"][0]
    checks = [line for line in script.splitlines() if line.startswith("grep ")]
    assert len(checks) == 2, script  # data check and EFA check
    return "set -euo pipefail\n" + "\n".join(checks).replace("/tmp/nccl.log", str(log)) + "\n"


# The line aws-ofi-nccl writes (aws/aws-ofi-nccl@2daf7d30:src/nccl_ofi_net.cpp: "Selected provider is %s, fabric
# is %s (found %d nics)"), as NCCL prints it with NCCL_DEBUG=INFO, and nccl-tests' closing data check.
OFI_LINE = "ip-10-1-0-7:88:95 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)"
DATA_OK = "# Out of bounds values : 0 OK"


@pytest.mark.parametrize(
    ("log", "passes"),
    [
        (f"{OFI_LINE}\n{DATA_OK}\n", True),
        # NCCL fell back to sockets: no provider line, the data is still right
        ("NCCL INFO NET/Socket : Using [0]eth0:10.1.0.7<0>\n" + DATA_OK + "\n", False),
        (OFI_LINE.replace("is efa", "is tcp") + "\n" + DATA_OK + "\n", False),
    ],
)
def test_smoke_test_passes_only_when_nccl_ran_on_efa(multi_node_files, tmp_path, log, passes):
    log_file = tmp_path / "nccl.log"
    log_file.write_text(log)
    result = subprocess.run(["bash", "-c", _efa_checks(multi_node_files, log_file)], capture_output=True, text=True)
    assert (result.returncode == 0) is passes, result.stderr


def test_smoke_test_launcher_tolerates_the_gpu_group_taints_and_waits_for_workers(multi_node_files):
    job = by_kind(multi_node_files, "MPIJob")
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    assert launcher["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]
    assert job["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
    policy = job["spec"]["runPolicy"]
    assert policy["backoffLimit"] >= 1 and policy["activeDeadlineSeconds"] > 0


def _accelerated_types() -> set[str]:
    return {t for t in cluster_instance_types() if re.match(r"ml\.(p|g|trn|inf)", t)}


# Types whose GPUs no source read here counts (see the comment above the catalog's rows): they need --gpus.
UNCOUNTED = {t for t in _accelerated_types() if t.startswith(("ml.g4dn.", "ml.g7."))}


def test_the_catalog_counts_every_accelerated_hyperpod_type_but_the_uncounted_ones():
    counted_types = {t for t in _accelerated_types() if (known := lookup(t)) and known.accelerators is not None}
    assert counted_types == _accelerated_types() - UNCOUNTED
    for name in ("ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge", "ml.p5.4xlarge", "ml.g7e.48xlarge"):
        assert counted(name)[0] >= 1
    assert lookup("ml.trn2.48xlarge").neuron == 16


def _one_group(instance_type: str, count: int = 2) -> dict[str, Any]:
    data = default_config_data()
    data["hyperpod"]["instance_groups"][0].update(instance_type=instance_type, instance_count=count)
    return data


@pytest.mark.parametrize("instance_type", ["ml.p6-b200.48xlarge", "ml.p6-b300.48xlarge", "ml.p5.4xlarge"])
def test_new_gpu_types_render(instance_type):
    files = render(data=_one_group(instance_type))
    gpus, efa = counted(instance_type)
    worker = by_kind(files, "MPIJob")["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"] == {"nvidia.com/gpu": gpus, "vpc.amazonaws.com/efa": efa}


def test_an_uncounted_type_is_named_and_gpus_efa_override(tmp_path, capsys):
    config = tmp_path / "g4dn.yaml"
    config.write_text(yaml.safe_dump(_one_group("ml.g4dn.12xlarge")))
    code = cli.main(["render-examples", "--config", str(config)])
    err = capsys.readouterr().err
    assert code == 2 and "ml.g4dn.12xlarge (instance group gpu-workers)" in err and "--gpus" in err
    code = cli.main(["render-examples", "--config", str(config), "--gpus", "4", "--efa", "1"])
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert code == 0
    (job,) = [d for d in docs if d["kind"] == "MPIJob"]
    assert job["spec"]["slotsPerWorker"] == 4
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"] == {"nvidia.com/gpu": 4, "vpc.amazonaws.com/efa": 1}


def test_efa_is_not_asked_of_a_type_without_it(tmp_path, capsys):
    # A pod asking vpc.amazonaws.com/efa of nodes without EFA never schedules ("0/64 nodes are available: 64
    # Insufficient vpc.amazonaws.com/efa.", aws-samples/aws-efa-eks#8): render-examples refuses to write one.
    config = tmp_path / "g5.yaml"
    config.write_text(yaml.safe_dump(_one_group("ml.g5.xlarge")))
    code = cli.main(["render-examples", "--config", str(config), "--efa", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "--efa 1: ml.g5.xlarge (instance group gpu-workers) has 0 EFA devices" in err
    code = cli.main(["render-examples", "--config", str(config), "--gpus", "2"])
    assert code == 2 and "--gpus 2" in capsys.readouterr().err
    # Without the options the catalog's counts are used: no EFA asked of ml.g5.xlarge.
    assert cli.main(["render-examples", "--config", str(config)]) == 0
    (worker,) = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d and d["kind"] == "MPIJob"]
    limits = worker["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "vpc.amazonaws.com/efa" not in limits


def test_render_examples_defaults_to_stdout_and_never_touches_examples(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").mkdir()
    code = cli.main(["render-examples", "--config", str(ROOT / "config" / "default.yaml")])
    assert code == 0
    assert list((tmp_path / "examples").iterdir()) == []
    kinds = {d["kind"] for d in yaml.safe_load_all(capsys.readouterr().out) if d}
    assert {"Namespace", "MPIJob", "Deployment", "Service"} <= kinds


def test_render_examples_removes_the_files_it_wrote_before_and_no_others(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["render-examples", "--config", str(ROOT / "config" / "default.yaml"), "--out", str(out)]) == 0
    assert (out / "namespace.yaml").exists()
    (out / "mine.yaml").write_text("kind: ConfigMap\n")
    config = tmp_path / "fsx.yaml"
    config.write_text(yaml.safe_dump(fsx_config_data()))
    assert cli.main(["render-examples", "--config", str(config), "--out", str(out)]) == 0
    assert not (out / "namespace.yaml").exists()  # FSx on: the storage stack makes the namespace
    assert (out / "mine.yaml").exists()
    assert "removed" in capsys.readouterr().out


def test_render_examples_to_an_unwritable_path_is_one_line_exit_2(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = cli.main(["render-examples", "--config", str(ROOT / "config" / "default.yaml"), "--out",
                     str(blocker / "x")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


ADDONS_ON = {"addons": {"training_operator": {"enabled": True},
                        "s3_csi": {"enabled": True, "bucket_arns": ["arn:aws:s3:::team-data", "arn:aws:s3:::a.b"]}}}


@pytest.fixture(scope="module")
def addons_files() -> dict[str, str]:
    return render({**ADDONS_ON, **MULTI_NODE})


def test_with_the_training_operator_the_job_is_a_hyperpod_pytorch_job(addons_files, multi_node_files):
    (job,) = [d for d in documents(addons_files) if d["kind"] == "HyperPodPyTorchJob"]
    assert not [d for d in documents(addons_files) if d["kind"] == "PyTorchJob"]
    assert job["apiVersion"] == "sagemaker.amazonaws.com/v1"
    gpus, efa = counted("ml.p4d.24xlarge")
    spec = job["spec"]
    assert spec["nprocPerNode"] == str(gpus)
    assert spec["runPolicy"]["jobMaxRetryCount"] == examples.JOB_MAX_RETRY_COUNT
    (replica,) = spec["replicaSpecs"]
    assert replica["replicas"] == 2
    (container,) = replica["template"]["spec"]["containers"]
    launch = container["command"][-1]
    assert "exec hyperpodrun --nnodes=2 --nproc-per-node=8 " in launch
    assert f"pip install --quiet {examples.ELASTIC_AGENT} " in launch
    assert container["ports"] == [{"containerPort": 8080}]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": gpus, "vpc.amazonaws.com/efa": efa}
    # The same pod otherwise: placement, tolerations, volumes.
    kubeflow = by_kind(multi_node_files, "PyTorchJob")["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert {k: v for k, v in replica["template"]["spec"].items() if k != "containers"} == \
        {k: v for k, v in kubeflow.items() if k != "containers"}


def test_s3_buckets_become_static_volumes_bound_to_their_claims(addons_files, default_files):
    assert "s3-volumes.yaml" not in default_files
    docs = list(yaml.safe_load_all(addons_files["s3-volumes.yaml"]))
    volumes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PersistentVolume"}
    claims = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PersistentVolumeClaim"}
    assert sorted(claims) == ["s3-a.b", "s3-team-data"]
    handles = set()
    for name, claim in claims.items():
        volume = volumes[claim["spec"]["volumeName"]]
        assert volume["spec"]["claimRef"] == {"namespace": "training", "name": name}
        assert claim["metadata"]["namespace"] == "training"
        assert volume["spec"]["storageClassName"] == claim["spec"]["storageClassName"] == ""
        assert volume["spec"]["csi"]["driver"] == "s3.csi.aws.com"
        assert volume["spec"]["csi"]["volumeAttributes"]["bucketName"] == name.removeprefix("s3-")
        handles.add(volume["spec"]["csi"]["volumeHandle"])
    assert len(handles) == 2  # the driver processes a volumeHandle once
