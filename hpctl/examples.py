"""Kubernetes manifests for data scientists, rendered from the app's config so they match the deployed cluster.

`hpctl render-examples` writes them; the rendering of config/default.yaml is kept in examples/ and a test
fails when it is stale. Names, the namespace, the claim of the shared file system and the instance type
come from the config; images are pinned here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from hpctl import teams
from hpctl.errors import UsageError
from infra.facts.instances import accelerator_kind, lookup


class Accelerators(NamedTuple):
    """What each example pod of the GPU group asks for: the catalog's counts, or --gpus/--efa."""

    gpus: int  # NVIDIA GPUs (nvidia.com/gpu)
    efa: int  # EFA devices (vpc.amazonaws.com/efa)


# Public images, pinned by tag. The CUDA of an image must be supported by the nodes' NVIDIA driver.
# AWS Deep Learning Container (PyTorch with EFA, aws-ofi-nccl and NCCL), from the ECR Public Gallery.
TRAINING_IMAGE = "public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2-v1.0"
# AWS's EFA + aws-ofi-nccl + NCCL + nccl-tests + Open MPI image (github.com/aws-samples/awsome-distributed-training).
NCCL_TESTS_IMAGE = "public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.43.2-ofiv1.16.3-ncclv2.27.7-1-testsv2.16.9"
# vLLM's OpenAI-compatible server (Docker Hub, vllm-project/vllm).
INFERENCE_IMAGE = "vllm/vllm-openai:v0.8.5"
INFERENCE_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
# Open MPI as installed in NCCL_TESTS_IMAGE.
MPIRUN = "/opt/amazon/openmpi/bin/mpirun --allow-run-as-root"

TRAINING_JOB = "train-auto-resume"
SMOKE_TEST_JOB = "nccl-smoke-test"
INFERENCE_APP = "inference"
# How often HyperPod restarts the job after a node fault before it gives up.
JOB_MAX_RETRY_COUNT = 3
SMOKE_TEST_RETRIES = 1
SMOKE_TEST_DEADLINE_SECONDS = 1800
EFA_PROOF = "selected provider is efa"
SHARED_MOUNT = "/fsx"
# NCCL and the data loaders need more shared memory than the container runtime's 64 MiB default.
SHM_MOUNT = {"name": "dshm", "mountPath": "/dev/shm"}  # noqa: S108 - a mount point in the pod, not a temp file
SHM_VOLUME = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
HEALTHY_NODE = {"sagemaker.amazonaws.com/node-health-status": "Schedulable"}
AUTO_RESUME = {
    "sagemaker.amazonaws.com/enable-job-auto-resume": "true",
    "sagemaker.amazonaws.com/job-max-retry-count": str(JOB_MAX_RETRY_COUNT),
}
# The HyperPod training operator's job (addons.training_operator on): apiVersion, kind and the spec fields used here
# (nprocPerNode as a string, replicaSpecs[] of name/replicas/template, runPolicy.jobMaxRetryCount/cleanPodPolicy)
# as in https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-operator-usage.html and AWS's job template,
# aws/sagemaker-hyperpod-cli@011ca927123e02b35a399935bbb3ab1905fe33c7:
# hyperpod-pytorch-job-template/hyperpod_pytorch_job_template/v1_1/template.py.
HYPERPOD_JOB_API = "sagemaker.amazonaws.com/v1"
HYPERPOD_JOB_KIND = "HyperPodPyTorchJob"
# The operator talks to the HyperPod elastic agent in each pod, which listens on this port (the usage page above).
ELASTIC_AGENT_PORT = 8080
# The agent is a pip package whose `hyperpodrun` launcher replaces torchrun ("To use the HyperPod training operator,
# you must first install the HyperPod elastic agent into your training image": https://pypi.org/project/
# hyperpod-elastic-agent/1.1.0/, where `--rdzv-backend hyperpod` is shown too). The example installs it when the
# pod starts; a real image should have it built in.
ELASTIC_AGENT = "hyperpod-elastic-agent==1.1.0"
# Mountpoint for Amazon S3 CSI driver (addons.s3_csi on): a statically provisioned PersistentVolume per bucket and
# its claim, as in awslabs/mountpoint-s3-csi-driver@57c6bedb46e2c1281883b80dad4d5d54b438b0de:
# examples/kubernetes/static_provisioning/static_provisioning.yaml (the capacity is required but ignored).
S3_CSI_DRIVER = "s3.csi.aws.com"
S3_NOMINAL_SIZE = "1200Gi"
TRAINING_FILE = "pytorchjob-auto-resume.yaml"
REGENERATE = "hpctl render-examples --config config/default.yaml --out examples"
RENDERED_MARK = "Rendered by `hpctl render-examples`"  # in every file it writes; marks the ones it may remove

# The HyperPod inference operator's custom resources (addons.inference_operator on), in the version their CRDs store:
# aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea (the pinned chart): helm_chart/HyperPodHelmChart/
# charts/inference-operator/config/crd/ (stored in tests/contract/pinned; the examples are validated against them).
# hpctl/endpoints.py reads them back with these names.
INFERENCE_GROUP, INFERENCE_VERSION = "inference.sagemaker.aws.amazon.com", "v1"
INFERENCE_API = f"{INFERENCE_GROUP}/{INFERENCE_VERSION}"
JUMPSTART_KIND = "JumpStartModel"
ENDPOINT_CONFIG_KIND = "InferenceEndpointConfig"
JUMPSTART_FILE = "jumpstart-model.yaml"
ENDPOINT_CONFIG_FILE = "inference-endpoint.yaml"
# A catalog model and a model of one's own weights, as AWS's walk-throughs deploy them (aws/sagemaker-hyperpod-cli@
# 011ca927123e02b35a399935bbb3ab1905fe33c7: examples/end_to_end_walkthrough/02-inference-deployment/
# 00-jumpstart-endpoint.md: MODEL_ID, and 01-custom-model-endpoint.md: TinyLlama's weights synced to S3 under
# CHECKPOINT_DIR, served by the DJL LMI image on port 8080 with the weights mounted as modelmount).
# The fields set are those AWS's own templates for `hyp create` write (aws/sagemaker-hyperpod-cli@011ca927:
# hyperpod-jumpstart-inference-template/.../v1_2/template.py and hyperpod-custom-inference-template/.../v1_2/
# template.py), less their empty strings (an empty tlsCertificateOutputS3Uri fails the CRD's pattern). Per-endpoint
# metrics (metrics.enabled) are what the observability add-on's inference family reads
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-model-deployment-observability.html).
JUMPSTART_MODEL_ID = "deepseek-llm-r1-distill-qwen-1-5b"
JUMPSTART_HUB = "SageMakerPublicHub"  # the CRD's default modelHubName
CUSTOM_MODEL = "tinyllama"
CUSTOM_MODEL_SOURCE = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"  # on Hugging Face, downloaded to MODEL_LOCATION
CUSTOM_MODEL_LOCATION = "tinyllama-1.1b-chat"
LMI_IMAGE_REPOSITORY = "djl-inference"
LMI_IMAGE_TAG = "0.33.0-lmi15.0.0-cu128"
LMI_PORT = 8080
MODEL_MOUNT = {"name": "modelmount", "mountPath": "/opt/ml/model"}
# The Deep Learning Containers registry of each region the inference operator's images are published in
# (infra/facts/addons.py INFERENCE_OPERATOR_REGIONS), from aws/deep-learning-containers@
# 008199507ef3e5b651d3577838837e25265afa10:available_images.md (the region table). ap-southeast-4 and eu-south-2 are not
# in that table: there the image is pulled from us-west-2, as AWS's walk-through writes it (unverified that the tag
# is published in every region listed).
DLC_REGISTRY_ACCOUNTS = {
    **dict.fromkeys(("us-east-1", "us-east-2", "us-west-1", "us-west-2", "ap-south-1", "ap-southeast-1",
                     "ap-southeast-2", "ap-northeast-1", "eu-central-1", "eu-west-1", "eu-west-2", "eu-north-1",
                     "sa-east-1"), "763104351884"),
    "ap-southeast-3": "907027046896",
}
DLC_FALLBACK_REGION = "us-west-2"
# Without spec.tlsConfig the operator writes each endpoint's certificate to the bucket the add-on is configured with
# (TLS_CERTIFICATE_OUTPUT_S3URI from tlsCertificateS3Bucket: the pinned chart's config/manager/manager.yaml lines
# 195-196; infra/constructs/addons.py InferenceOperator sets it to its TLS bucket), so the examples leave it out.
# The SageMaker endpoint name: the CRDs' pattern and length (spec.endpointName, spec.sageMakerEndpoint.name).
ENDPOINT_NAME_MAX = 63

# The example job runs for a few minutes, so it checkpoints every minute by default and a restart visibly
# resumes; a real job takes the interval `hpctl plan` computes (render-examples --checkpoint-interval-minutes).
CHECKPOINT_INTERVAL_MINUTES = 1.0

# A small data-parallel job on synthetic data: it checkpoints to the shared volume every
# CHECKPOINT_INTERVAL_MINUTES and resumes from the latest checkpoint when HyperPod restarts it. Each checkpoint is a
# new file written in one sequential pass, since on an S3 bucket Mountpoint neither renames nor overwrites by default
# (awslabs/mountpoint-s3 doc/SEMANTICS.md: "We do not try to emulate operations like `rename`"; sequential writes of
# new files only).
TRAIN_SCRIPT = '''\
import io
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("nccl")
rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
checkpoint_dir = os.environ["CHECKPOINT_DIR"]
os.makedirs(checkpoint_dir, exist_ok=True)

model = DistributedDataParallel(torch.nn.Linear(4096, 4096).cuda(), device_ids=[local_rank])
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
# Each checkpoint is a new file written front to back, never renamed or overwritten: the same code works on FSx for
# Lustre and on an S3 bucket mounted by Mountpoint, which does not rename. The newest one that reads back wins (a
# crash mid-write on FSx leaves a torn last file).
for name in sorted((n for n in os.listdir(checkpoint_dir) if n.endswith(".pt")), reverse=True):
    try:
        state = torch.load(os.path.join(checkpoint_dir, name), map_location="cuda")
    except Exception:  # a torn file: try the one before
        continue
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    step = state["step"]
    if rank == 0:
        print(f"resumed from step {step} ({name})", flush=True)
    break

total_steps = int(os.environ.get("TOTAL_STEPS", "5000"))
interval_seconds = float(os.environ["CHECKPOINT_INTERVAL_MINUTES"]) * 60
last_checkpoint = time.monotonic()
while step < total_steps:
    loss = model(torch.randn(64, 4096, device="cuda")).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    step += 1
    # Rank 0's clock decides for every rank, so all of them reach the barrier below together.
    due = torch.tensor([int(time.monotonic() - last_checkpoint >= interval_seconds)], device="cuda")
    dist.broadcast(due, src=0)
    if due.item():
        last_checkpoint = time.monotonic()
        if rank == 0:
            state = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
            buffer = io.BytesIO()
            torch.save(state, buffer)
            with open(os.path.join(checkpoint_dir, f"step-{step:09d}.pt"), "wb") as handle:
                handle.write(buffer.getvalue())
            print(f"step {step} loss {loss.item():.4f} checkpoint saved", flush=True)
        dist.barrier()
    time.sleep(0.05)
dist.destroy_process_group()
'''


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings (scripts), no anchors and aliases (kubectl users read these)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def gpu_group(config: Any) -> Any:
    """The first instance group with NVIDIA GPUs (by the instance catalog): the examples run there."""
    for group in config.hyperpod.instance_groups:
        if accelerator_kind(group.instance_type) == "nvidia":
            return group
    types = ", ".join(g.instance_type for g in config.hyperpod.instance_groups)
    raise UsageError(f"no instance group with NVIDIA GPUs in the config (have: {types}); the examples need one")


def accelerators(group: Any, gpus: int | None = None, efa: int | None = None) -> Accelerators:
    """The group's GPUs and EFA devices: from the instance catalog, or from --gpus/--efa, which win; never more than
    the catalog counts for the type (a pod asking for more never schedules: "Insufficient vpc.amazonaws.com/efa")."""
    known = lookup(group.instance_type)
    for label, option, asked, has in (("NVIDIA GPUs", "--gpus", gpus, known.gpus if known else None),
                                      ("EFA devices", "--efa", efa, known.efa if known else None)):
        if asked is not None and has is not None and asked > has:
            raise UsageError(f"{option} {asked}: {group.instance_type} (instance group {group.name}) has {has} "
                             f"{label} (infra/facts/instances.py); a pod asking for more stays Pending")
    gpus = gpus if gpus is not None else known.gpus if known is not None else None
    efa = efa if efa is not None else known.efa if known is not None else None
    missing = [(label, option) for label, option, count in (("GPU", "--gpus N", gpus), ("EFA", "--efa N", efa))
               if count is None]
    if gpus is None or efa is None:
        raise UsageError(
            f"{group.instance_type} (instance group {group.name}) has no {' or '.join(m[0] for m in missing)} count "
            f"in the instance catalog (infra/facts/instances.py): pass {' and '.join(m[1] for m in missing)}"
        )
    return Accelerators(gpus, efa)


def namespace(config: Any) -> str:
    return str(config.storage.fsx_lustre.namespace)


def _tolerations(group: Any) -> list[dict[str, Any]]:
    tolerations = []
    for taint in group.taints:
        toleration = {"key": taint.key, "operator": "Equal" if taint.value is not None else "Exists"}
        if taint.value is not None:
            toleration["value"] = taint.value
        toleration["effect"] = taint.effect
        tolerations.append(toleration)
    return tolerations


def _node_placement(group: Any) -> dict[str, Any]:
    placement: dict[str, Any] = {
        "nodeSelector": {**HEALTHY_NODE, "node.kubernetes.io/instance-type": group.instance_type},
    }
    if tolerations := _tolerations(group):
        placement["tolerations"] = tolerations
    return placement


def _accelerator_resources(gpus: int, efa: int) -> dict[str, Any]:
    amounts: dict[str, int] = {"nvidia.com/gpu": gpus}
    if efa:
        amounts["vpc.amazonaws.com/efa"] = efa
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _fsx_volume(config: Any, ns: str) -> dict[str, Any] | None:
    """The FSx for Lustre claim, which the storage stack creates in storage.fsx_lustre.namespace only."""
    fsx = config.storage.fsx_lustre
    if fsx.enabled and ns == fsx.namespace:
        return {"name": "shared", "persistentVolumeClaim": {"claimName": fsx.pvc_name}}
    return None


def _s3_claim(bucket_arn: str) -> tuple[str, str]:
    bucket = bucket_arn.split(":::", 1)[1]
    return bucket, f"s3-{bucket}"


def checkpoint_volume(config: Any, ns: str) -> dict[str, Any] | None:
    """A volume in ``ns`` that outlives the pods, for the auto-resume job's checkpoints: the FSx claim, else the
    claim of the first bucket of addons.s3_csi (s3_volumes renders it in ``ns``); None when there is neither."""
    fsx = _fsx_volume(config, ns)
    if fsx is not None:
        return fsx
    s3 = config.addons.s3_csi
    if s3.enabled and s3.bucket_arns:
        return {"name": "shared", "persistentVolumeClaim": {"claimName": _s3_claim(s3.bucket_arns[0])[1]}}
    return None


def training_refusal(config: Any, where: teams.Placement | None = None) -> str | None:
    """Why the auto-resume job is not rendered (its checkpoints would die with the pod), or None."""
    ns = where.namespace if where else namespace(config)
    if checkpoint_volume(config, ns) is not None:
        return None
    fsx = config.storage.fsx_lustre
    why = (f"the FSx claim is in namespace {fsx.namespace}, not {ns}" if fsx.enabled
           else "storage.fsx_lustre is off")
    return (f"{TRAINING_FILE} not rendered: its checkpoints would die with the pod ({why}, and addons.s3_csi has no "
            "bucket); enable storage.fsx_lustre, or addons.s3_csi with a bucket, and render again")


def _dump(documents: list[dict[str, Any]], project: str, title: str) -> str:
    header = (
        f"# {title}\n"
        f"# {RENDERED_MARK} from the config of project {project}; edit the config or\n"
        "# hpctl/examples.py, not this file, then render again.\n"
    )
    body = "---\n".join(yaml.dump(d, Dumper=_Dumper, sort_keys=False, width=120) for d in documents)
    return header + body


def training_job(
    config: Any, group: Any, acc: Accelerators, volume: dict[str, Any], ns: str,
    checkpoint_interval_minutes: float = CHECKPOINT_INTERVAL_MINUTES,
) -> list[dict[str, Any]]:
    """The auto-resume job, checkpointing to ``volume`` (checkpoint_volume), in namespace ``ns``."""
    gpus, efa = acc.gpus, acc.efa
    nodes = max(group.instance_count, 1)
    env = [
        {"name": "CHECKPOINT_DIR", "value": f"{SHARED_MOUNT}/checkpoints/{TRAINING_JOB}"},
        {"name": "CHECKPOINT_INTERVAL_MINUTES", "value": f"{checkpoint_interval_minutes:g}"},
        {"name": "NCCL_DEBUG", "value": "INFO"},
    ]
    if efa:
        env.append({"name": "FI_PROVIDER", "value": "efa"})
    torchrun = [
        "torchrun",
        f"--nnodes={nodes}",
        f"--nproc-per-node={gpus}",
        "--rdzv-backend=c10d",
        # MASTER_ADDR and MASTER_PORT are set in every pod by the training operator.
        "--rdzv-endpoint=$(MASTER_ADDR):$(MASTER_PORT)",
        f"--rdzv-id={TRAINING_JOB}",
        "/opt/train/train.py",
    ]
    pod = {
        "metadata": {"labels": {"app": TRAINING_JOB}},
        "spec": {
            **_node_placement(group),
            "containers": [{
                "name": "pytorch",  # the training operator looks for this container name
                "image": TRAINING_IMAGE,
                "command": torchrun,
                "env": env,
                "resources": _accelerator_resources(gpus, efa),
                "volumeMounts": [
                    {"name": "shared", "mountPath": SHARED_MOUNT},
                    {"name": "train-script", "mountPath": "/opt/train", "readOnly": True},
                    dict(SHM_MOUNT),
                ],
            }],
            "volumes": [
                volume,
                {"name": "train-script", "configMap": {"name": f"{TRAINING_JOB}-script"}},
                dict(SHM_VOLUME),
            ],
        },
    }
    script = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{TRAINING_JOB}-script", "namespace": ns},
        "data": {"train.py": TRAIN_SCRIPT},
    }
    if config.addons.training_operator.enabled:
        return [script, _hyperpod_job(ns, pod, nodes, gpus)]
    replicas: dict[str, Any] = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": pod}}
    if nodes > 1:
        replicas["Worker"] = {"replicas": nodes - 1, "restartPolicy": "OnFailure", "template": pod}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": TRAINING_JOB, "namespace": ns, "annotations": dict(AUTO_RESUME)},
        "spec": {"pytorchReplicaSpecs": replicas},
    }
    return [script, job]


def _hyperpod_job(ns: str, pod: dict[str, Any], nodes: int, gpus: int) -> dict[str, Any]:
    """The same pods as a HyperPodPyTorchJob: hyperpodrun (the elastic agent) instead of torchrun, and the
    operator's restarts (runPolicy) instead of the auto-resume annotations."""
    (container,) = pod["spec"]["containers"]
    hyperpodrun = (f"pip install --quiet {ELASTIC_AGENT} && exec hyperpodrun --nnodes={nodes} "
                   f"--nproc-per-node={gpus} --rdzv-backend hyperpod /opt/train/train.py")
    container = {
        **{k: v for k, v in container.items() if k != "command"},
        "name": "pytorch-job-container",  # the name AWS's job template gives it
        "command": ["/bin/bash", "-c", hyperpodrun],
        "ports": [{"containerPort": ELASTIC_AGENT_PORT}],
    }
    template = {**pod, "spec": {**pod["spec"], "containers": [container]}}
    return {
        "apiVersion": HYPERPOD_JOB_API,
        "kind": HYPERPOD_JOB_KIND,
        "metadata": {"name": TRAINING_JOB, "namespace": ns},
        "spec": {
            "nprocPerNode": str(gpus),
            "replicaSpecs": [{"name": "pod", "replicas": nodes, "template": template}],
            "runPolicy": {"jobMaxRetryCount": JOB_MAX_RETRY_COUNT, "cleanPodPolicy": "None"},
        },
    }


def s3_volumes(config: Any, ns: str) -> list[dict[str, Any]]:
    """A static PersistentVolume and its claim for each bucket of addons.s3_csi, in namespace ``ns``."""
    documents: list[dict[str, Any]] = []
    for arn in config.addons.s3_csi.bucket_arns:
        bucket, claim = _s3_claim(arn)
        access = {"accessModes": ["ReadWriteMany"], "storageClassName": ""}
        documents.append({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{ns}-{claim}"},
            "spec": {
                "capacity": {"storage": S3_NOMINAL_SIZE},
                **access,
                # Only this claim may bind the volume.
                "claimRef": {"namespace": ns, "name": claim},
                "csi": {"driver": S3_CSI_DRIVER, "volumeHandle": f"s3-csi-{bucket}",
                        "volumeAttributes": {"bucketName": bucket}},
            },
        })
        documents.append({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": ns},
            "spec": {**access, "resources": {"requests": {"storage": S3_NOMINAL_SIZE}},
                     "volumeName": f"{ns}-{claim}"},
        })
    return documents


def inference(config: Any, group: Any, ns: str) -> list[dict[str, Any]]:
    labels = {"app": INFERENCE_APP}
    env = []
    mounts = [dict(SHM_MOUNT)]
    volumes: list[dict[str, Any]] = [dict(SHM_VOLUME)]
    if (fsx := _fsx_volume(config, ns)) is not None:
        # Model weights are downloaded once to the shared file system and reused by every replica.
        env.append({"name": "HF_HOME", "value": f"{SHARED_MOUNT}/huggingface"})
        mounts.append({"name": "shared", "mountPath": SHARED_MOUNT})
        volumes.append(fsx)
    container: dict[str, Any] = {
        "name": "vllm",
        "image": INFERENCE_IMAGE,
        "args": ["--model", INFERENCE_MODEL, "--port", "8000"],
        "ports": [{"name": "http", "containerPort": 8000}],
        "resources": _accelerator_resources(1, 0),
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "initialDelaySeconds": 30,
                           "periodSeconds": 10},
        "volumeMounts": mounts,
    }
    if env:
        container["env"] = env
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": INFERENCE_APP, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {**_node_placement(group), "containers": [container], "volumes": volumes},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": INFERENCE_APP, "namespace": ns, "labels": labels},
        "spec": {"type": "ClusterIP", "selector": labels,
                 "ports": [{"name": "http", "port": 8000, "targetPort": "http"}]},
    }
    return [deployment, service]


def _endpoint_name(base: str, group: Any) -> str:
    """``<base>-<group>`` within the CRDs' 63 characters, lower case (it is also the object's Kubernetes name)."""
    return f"{base}-{group.name}".lower()[:ENDPOINT_NAME_MAX].rstrip("-")


def lmi_image(region: str) -> str:
    """The DJL LMI serving image in ``region``'s Deep Learning Containers registry (DLC_REGISTRY_ACCOUNTS)."""
    if region not in DLC_REGISTRY_ACCOUNTS:
        region = DLC_FALLBACK_REGION
    return f"{DLC_REGISTRY_ACCOUNTS[region]}.dkr.ecr.{region}.amazonaws.com/{LMI_IMAGE_REPOSITORY}:{LMI_IMAGE_TAG}"


def inference_groups(config: Any) -> tuple[list[Any], list[str]]:
    """The NVIDIA groups the operator's pods can run on, and why each other NVIDIA group is left out: the CRDs have
    no tolerations (InferenceEndpointConfig's spec.kubernetes takes initContainers, schedulerName, serviceAccountName
    and volumes only; JumpStartModel has no pod field at all), so a group tainted NoSchedule or NoExecute never
    takes their pods."""
    usable, left_out = [], []
    for group in config.hyperpod.instance_groups:
        if accelerator_kind(group.instance_type) != "nvidia":
            continue
        blocking = [t.key for t in group.taints if t.effect in ("NoSchedule", "NoExecute")]
        if blocking:
            left_out.append(f"instance group {group.name} (taints {', '.join(blocking)}: the inference CRDs "
                            "have no tolerations)")
        else:
            usable.append(group)
    return usable, left_out


def _placement_spec(group: Any) -> dict[str, Any]:
    """Where an InferenceEndpointConfig's pods go (the three fields are mutually exclusive, as the CRD says):
    ``instanceType`` for a group of one type on demand; ``instanceTypes`` (the CRD's own fallback list, "in order of
    preference") for a flexible group; node affinity for a Spot group, so that its pods land on the group's
    healthy nodes by the group's own labels (KubernetesConfig.Labels) as well as its types, and not on an
    on-demand group of the same type."""
    types = list(group.instance_types)
    if group.capacity != "spot":
        return {"instanceTypes": types} if len(types) > 1 else {"instanceType": group.instance_type}
    expressions = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types}]
    expressions += [{"key": key, "operator": "In", "values": [value]}
                    for key, value in {**HEALTHY_NODE, **group.labels}.items()]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}


def jumpstart_models(config: Any, groups: list[Any], ns: str) -> list[dict[str, Any]]:
    """A JumpStartModel per group: JUMPSTART_MODEL_ID from the SageMaker public hub on the group's first-choice
    type (the CRD takes one instance type), registered as a SageMaker endpoint to invoke."""
    documents = []
    for group in groups:
        name = _endpoint_name("deepseek-qwen-1-5b", group)
        documents.append({
            "apiVersion": INFERENCE_API,
            "kind": JUMPSTART_KIND,
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                # acceptEula is required: true accepts the model's licence, which a gated model needs.
                "model": {"modelHubName": JUMPSTART_HUB, "modelId": JUMPSTART_MODEL_ID, "acceptEula": False},
                "server": {"instanceType": group.instance_type},
                "sageMakerEndpoint": {"name": name},
                "metrics": {"enabled": True},
            },
        })
    return documents


def model_source(config: Any, fsx_file_system_id: str | None) -> dict[str, Any]:
    """Where the custom model's weights are: the FSx for Lustre file system when its ID is given, else the first
    bucket of addons.s3_csi (the operator needs that driver; the bucket is taken to be in the cluster's region)."""
    if fsx_file_system_id is not None:
        # The CRD requires fileSystemId only; AWS's custom template also sends dnsName and mountName, which this
        # rendering cannot know offline: unverified that the operator mounts without them.
        return {"modelSourceType": "fsx", "fsxStorage": {"fileSystemId": fsx_file_system_id},
                "modelLocation": CUSTOM_MODEL_LOCATION}
    bucket = _s3_claim(config.addons.s3_csi.bucket_arns[0])[0]
    return {"modelSourceType": "s3", "s3Storage": {"bucketName": bucket, "region": config.region},
            "modelLocation": CUSTOM_MODEL_LOCATION}


# An FSx file system ID, as botocore's FSx model bounds it (shape FileSystemId: pattern ^(fs-[0-9a-f]{8,})$, 11 to 21
# characters).
FSX_FILE_SYSTEM_ID = re.compile(r"fs-[0-9a-f]{8,18}")


def check_fsx_model_source(config: Any, file_system_id: str) -> None:
    """Refuses --fsx-file-system-id where the examples could not use it, naming the option and the value."""
    if not FSX_FILE_SYSTEM_ID.fullmatch(file_system_id):
        raise UsageError(f"--fsx-file-system-id {file_system_id!r}: not an FSx file system ID (fs- and 8 to 18 hex "
                         "digits, e.g. the storage stack's FileSystemId output)")
    if not config.addons.inference_operator.enabled:
        raise UsageError(f"--fsx-file-system-id {file_system_id}: it places the inference operator's model weights, "
                         "and addons.inference_operator is off in the config")
    if not config.storage.fsx_lustre.enabled:
        raise UsageError(f"--fsx-file-system-id {file_system_id}: storage.fsx_lustre is off, so the cluster has no FSx "
                         "CSI driver to mount the weights with")


def endpoint_configs(config: Any, groups: list[Any], ns: str,
                     fsx_file_system_id: str | None = None) -> list[dict[str, Any]]:
    """An InferenceEndpointConfig per group: CUSTOM_MODEL's weights (model_source) served by the LMI image on one
    GPU, placed on the group (_placement_spec), registered as a SageMaker endpoint to invoke."""
    documents = []
    for group in groups:
        name = _endpoint_name(CUSTOM_MODEL, group)
        gpu = {"nvidia.com/gpu": 1}
        documents.append({
            "apiVersion": INFERENCE_API,
            "kind": ENDPOINT_CONFIG_KIND,
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "modelName": name,
                "endpointName": name,
                **_placement_spec(group),
                "modelSourceConfig": model_source(config, fsx_file_system_id),
                "worker": {
                    "image": lmi_image(config.region),
                    "resources": {"requests": dict(gpu), "limits": dict(gpu)},
                    "modelInvocationPort": {"containerPort": LMI_PORT, "name": "http"},
                    "modelVolumeMount": dict(MODEL_MOUNT),
                },
                "metrics": {"enabled": True},
            },
        })
    return documents


def smoke_test(config: Any, group: Any, acc: Accelerators, ns: str) -> list[dict[str, Any]]:
    gpus, efa = acc.gpus, acc.efa
    checks = [
        "set -euo pipefail",
        "echo '== GPUs per worker'",
        f"{MPIRUN} -np 2 -N 1 nvidia-smi -L",
    ]
    mpi_env = "-x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x PATH"
    if efa:
        checks += ["echo '== EFA devices per worker'", f"{MPIRUN} -np 2 -N 1 fi_info -p efa -t FI_EP_RDM"]
        mpi_env += " -x FI_PROVIDER=efa"
    checks += [
        "echo '== NCCL all_reduce across 2 nodes'",
        f"{MPIRUN} -np {2 * gpus} -N {gpus} --bind-to none {mpi_env} "
        "/opt/nccl-tests/build/all_reduce_perf -b 8 -e 1G -f 2 -g 1 -c 1 -n 20 | tee /tmp/nccl.log",
        "grep -q 'Out of bounds values : 0 OK' /tmp/nccl.log",
    ]
    if efa:
        # aws-ofi-nccl logs "Selected provider is efa, fabric is ..." when NCCL's network plugin runs on EFA: the
        # proof that the all_reduce did not fall back to TCP. Before v1.14.0 it said "Provider", hence -i.
        # Source: aws/aws-ofi-nccl@2daf7d303aa139a03140aa530957d10521e4478d:src/nccl_ofi_net.cpp (NCCL_OFI_INFO),
        # changed in 06e8db33 "core: Print fabric name with provider name" (first tag v1.14.0).
        checks.append(f"grep -qi '{EFA_PROOF}' /tmp/nccl.log || {{ echo 'NCCL did not use EFA' >&2; exit 1; }}")
    checks.append("echo 'smoke test passed'")
    worker = {
        "spec": {
            **_node_placement(group),
            "containers": [{
                "name": "worker",
                "image": NCCL_TESTS_IMAGE,
                # The launcher reaches the workers over ssh (MPI operator v2).
                "command": ["/bin/bash", "-c"],
                "args": ["mkdir -p /run/sshd && exec /usr/sbin/sshd -De"],
                "resources": _accelerator_resources(gpus, efa),
                "volumeMounts": [dict(SHM_MOUNT)],
            }],
            "volumes": [dict(SHM_VOLUME)],
        }
    }
    launcher_spec: dict[str, Any] = {"nodeSelector": dict(HEALTHY_NODE)}
    if tolerations := _tolerations(group):
        # The launcher needs no GPU, but a cluster of only tainted GPU nodes must still take it.
        launcher_spec["tolerations"] = tolerations
    launcher = {
        "spec": {
            **launcher_spec,
            "containers": [{
                "name": "launcher",
                "image": NCCL_TESTS_IMAGE,
                "command": ["/bin/bash", "-c"],
                "args": ["\n".join(checks) + "\n"],
            }],
        }
    }
    return [{
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": SMOKE_TEST_JOB, "namespace": ns},
        "spec": {
            "slotsPerWorker": gpus,
            # MPIJob v2beta1 (kubeflow/mpi-operator@caa3c47f:pkg/apis/kubeflow/v2beta1/types.go, also in v0.5.0,
            # the operator the HyperPod dependencies chart ships at the pinned a00b22d1 (and at main 011ca927):
            # aws/sagemaker-hyperpod-cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea:helm_chart/HyperPodHelmChart/
            # charts/mpi-operator/Chart.yaml appVersion 0.5.0; its templates/mpijob-crd.yaml has the field).
            # The launcher starts once every worker is Ready, so mpirun does not race the workers' sshd.
            "launcherCreationPolicy": "WaitForWorkersReady",
            # backoffLimit and activeDeadlineSeconds go to the launcher's Job: one more try for a transient
            # failure, and a hung run ends instead of holding two GPU nodes.
            "runPolicy": {
                "cleanPodPolicy": "Running",
                "backoffLimit": SMOKE_TEST_RETRIES,
                "activeDeadlineSeconds": SMOKE_TEST_DEADLINE_SECONDS,
            },
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": launcher},
                # Two nodes: the test is about the network between them.
                "Worker": {"replicas": 2, "restartPolicy": "Never", "template": worker},
            },
        },
    }]


def render(
    config: Any, gpus: int | None = None, efa: int | None = None,
    checkpoint_interval_minutes: float = CHECKPOINT_INTERVAL_MINUTES, where: teams.Placement | None = None,
    fsx_file_system_id: str | None = None,
) -> dict[str, str]:
    """File name -> manifest text for ``config``; ``gpus``/``efa`` override the table for the GPU group, and the
    training job checkpoints every ``checkpoint_interval_minutes``. With ``where`` (teams.placement) every
    manifest goes to the team's namespace and the jobs to its queue. The auto-resume job is left out when it has
    no volume that outlives its pods (training_refusal says why)."""
    group = gpu_group(config)
    acc = accelerators(group, gpus, efa)
    ns = where.namespace if where else namespace(config)

    def dump(documents: list[dict[str, Any]], title: str) -> str:
        placed = [teams.apply(d, where) for d in documents] if where else documents
        if where:
            title += (f"\n# For team {where.team}: namespace {where.namespace}, Kueue queue "
                      f"{where.labels[teams.QUEUE_LABEL]}.")
        return _dump(placed, config.project, title)

    files: dict[str, str] = {}
    if not config.storage.fsx_lustre.enabled and where is None:
        namespace_doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        files["namespace.yaml"] = _dump(
            [namespace_doc], config.project,
            "The namespace of the examples (with FSx enabled the storage stack creates it).")
    operator = config.addons.training_operator.enabled
    volume = checkpoint_volume(config, ns)
    if volume is not None:
        on = "FSx for Lustre" if _fsx_volume(config, ns) else "an S3 bucket (its claim is in s3-volumes.yaml)"
        files[TRAINING_FILE] = dump(
            training_job(config, group, acc, volume, ns, checkpoint_interval_minutes),
            "Distributed PyTorch training with the HyperPod training operator's restarts, checkpointing to "
            f"{on}." if operator else
            f"Distributed PyTorch training with HyperPod job auto-resume, checkpointing to {on}.")
    files["inference.yaml"] = dump(
        inference(config, group, ns), f"An OpenAI-compatible vLLM server for {INFERENCE_MODEL} and its Service.")
    if config.addons.inference_operator.enabled:
        files.update(_operator_files(config, ns, dump, fsx_file_system_id))
    title = "Smoke test: GPUs, EFA and an NCCL all_reduce across two nodes."
    if group.instance_count < 2:
        title += (f"\n# It needs 2 nodes of {group.instance_type}; instance group {group.name} has "
                  f"{group.instance_count}: raise its instance_count first.")
    files["nccl-smoke-test.yaml"] = dump(smoke_test(config, group, acc, ns), title)
    if config.addons.s3_csi.enabled:
        files["s3-volumes.yaml"] = dump(
            s3_volumes(config, ns),
            "S3 buckets as volumes (Mountpoint for Amazon S3 CSI driver): a claim per bucket, mount it in a pod.\n"
            "# Pods read and write new files; to let them delete, add `mountOptions: [allow-delete]` to the volume.")
    return files


def _operator_files(config: Any, ns: str, dump: Any, fsx_file_system_id: str | None) -> dict[str, str]:
    """The inference operator's two examples, for every NVIDIA group its pods can run on (inference_groups)."""
    groups, left_out = inference_groups(config)
    if not groups:
        return {}
    note = f"\n# Left out: {'; '.join(left_out)}." if left_out else ""
    source = (f"FSx for Lustre file system {fsx_file_system_id}" if fsx_file_system_id is not None else
              f"s3://{model_source(config, None)['s3Storage']['bucketName']}")
    return {
        JUMPSTART_FILE: dump(
            jumpstart_models(config, groups, ns),
            f"A SageMaker JumpStart model ({JUMPSTART_MODEL_ID}) served by the HyperPod inference operator, one "
            "per GPU group.\n# The model must support the instance type (`hyp create hyp-jumpstart-endpoint` "
            "checks it); deploy: kubectl apply -f, then\n# hpctl endpoints list / invoke / delete." + note),
        ENDPOINT_CONFIG_FILE: dump(
            endpoint_configs(config, groups, ns, fsx_file_system_id),
            f"Your own weights ({CUSTOM_MODEL_SOURCE}, copied to {CUSTOM_MODEL_LOCATION}/ of {source}) served by "
            "the HyperPod\n# inference operator with the DJL LMI image, one per GPU group. Copy the weights "
            "first (docs/data-scientists.md)." + note),
    }


def stream(files: dict[str, str]) -> str:
    """Every manifest as one multi-document YAML stream (for stdout and `kubectl apply -f -`)."""
    return "---\n".join(files.values())


def write(files: dict[str, str], out_dir: Path) -> tuple[list[Path], list[Path]]:
    """Write the files; remove the ones an earlier rendering wrote there that this one no longer makes."""
    out_dir.mkdir(parents=True, exist_ok=True)
    removed = [
        path for path in sorted(out_dir.glob("*.yaml"))
        if path.name not in files and RENDERED_MARK in path.read_text(encoding="utf-8", errors="replace")
    ]
    for path in removed:
        path.unlink()
    written = []
    for name, text in files.items():
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written, removed
