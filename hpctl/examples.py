"""Kubernetes manifests for data scientists, rendered from the app's config so they match the deployed cluster.

`hpctl render-examples` writes them; the rendering of config/default.yaml is kept in examples/ and a test
fails when it is stale. Names, the namespace, the claim of the shared file system and the instance type
come from the config; images are pinned here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from hpctl.errors import UsageError

# NVIDIA GPUs and EFA devices (network interfaces of type efa a pod can request) per instance type.
# Source: Amazon EC2 accelerated computing instance specifications
# (https://aws.amazon.com/ec2/instance-types/#Accelerated_Computing) and "Maximum EFA interfaces" per type in
# the Amazon EC2 User Guide (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html#efa-instance-types).
# Types without EFA support have 0. Trainium/Inferentia types have no NVIDIA GPU and are not listed.
ACCELERATORS: dict[str, tuple[int, int]] = {
    "ml.g5.xlarge": (1, 0),
    "ml.g5.2xlarge": (1, 0),
    "ml.g5.4xlarge": (1, 0),
    "ml.g5.8xlarge": (1, 1),
    "ml.g5.12xlarge": (4, 1),
    "ml.g5.16xlarge": (1, 1),
    "ml.g5.24xlarge": (4, 1),
    "ml.g5.48xlarge": (8, 1),
    "ml.g6.xlarge": (1, 0),
    "ml.g6.2xlarge": (1, 0),
    "ml.g6.4xlarge": (1, 0),
    "ml.g6.8xlarge": (1, 1),
    "ml.g6.12xlarge": (4, 1),
    "ml.g6.16xlarge": (1, 1),
    "ml.g6.24xlarge": (4, 1),
    "ml.g6.48xlarge": (8, 1),
    "ml.g6e.xlarge": (1, 0),
    "ml.g6e.2xlarge": (1, 0),
    "ml.g6e.4xlarge": (1, 0),
    "ml.g6e.8xlarge": (1, 1),
    "ml.g6e.12xlarge": (4, 1),
    "ml.g6e.16xlarge": (1, 1),
    "ml.g6e.24xlarge": (4, 2),
    "ml.g6e.48xlarge": (8, 4),
    "ml.p4d.24xlarge": (8, 4),
    "ml.p4de.24xlarge": (8, 4),
    "ml.p5.48xlarge": (8, 32),
    "ml.p5e.48xlarge": (8, 32),
    "ml.p5en.48xlarge": (8, 16),
}

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
SHARED_MOUNT = "/fsx"
# NCCL and the data loaders need more shared memory than the container runtime's 64 MiB default.
SHM_MOUNT = {"name": "dshm", "mountPath": "/dev/shm"}  # noqa: S108 - a mount point in the pod, not a temp file
SHM_VOLUME = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
HEALTHY_NODE = {"sagemaker.amazonaws.com/node-health-status": "Schedulable"}
AUTO_RESUME = {
    "sagemaker.amazonaws.com/enable-job-auto-resume": "true",
    "sagemaker.amazonaws.com/job-max-retry-count": str(JOB_MAX_RETRY_COUNT),
}
REGENERATE = "hpctl render-examples --config config/default.yaml --out examples"

# The example job runs for a few minutes, so it checkpoints every minute by default and a restart visibly
# resumes; a real job takes the interval `hpctl plan` computes (render-examples --checkpoint-interval-minutes).
CHECKPOINT_INTERVAL_MINUTES = 1.0

# A small data-parallel job on synthetic data: it checkpoints to the shared volume every
# CHECKPOINT_INTERVAL_MINUTES and resumes from the latest checkpoint when HyperPod restarts it.
TRAIN_SCRIPT = '''\
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
latest = os.path.join(checkpoint_dir, "latest.pt")

model = DistributedDataParallel(torch.nn.Linear(4096, 4096).cuda(), device_ids=[local_rank])
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
if os.path.exists(latest):
    state = torch.load(latest, map_location="cuda")
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    step = state["step"]
    if rank == 0:
        print(f"resumed from step {step}", flush=True)

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
            torch.save(state, latest + ".tmp")
            os.replace(latest + ".tmp", latest)  # a crash mid-write never leaves a torn checkpoint
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


def accelerators(instance_type: str) -> tuple[int, int]:
    """(NVIDIA GPUs, EFA devices) of an instance type; UsageError for a type without NVIDIA GPUs."""
    if instance_type not in ACCELERATORS:
        raise UsageError(f"{instance_type} has no NVIDIA GPU in the examples' table (hpctl/examples.py)")
    return ACCELERATORS[instance_type]


def gpu_group(config: Any) -> Any:
    """The first instance group with NVIDIA GPUs: the examples run there."""
    for group in config.hyperpod.instance_groups:
        if group.instance_type in ACCELERATORS:
            return group
    types = ", ".join(g.instance_type for g in config.hyperpod.instance_groups)
    raise UsageError(f"no instance group with NVIDIA GPUs in the config (have: {types}); the examples need one")


def namespace(config: Any) -> str:
    return str(config.storage.fsx_lustre.namespace)


def _node_placement(group: Any) -> dict[str, Any]:
    placement: dict[str, Any] = {
        "nodeSelector": {**HEALTHY_NODE, "node.kubernetes.io/instance-type": group.instance_type},
    }
    tolerations = []
    for taint in group.taints:
        toleration = {"key": taint.key, "operator": "Equal" if taint.value is not None else "Exists"}
        if taint.value is not None:
            toleration["value"] = taint.value
        toleration["effect"] = taint.effect
        tolerations.append(toleration)
    if tolerations:
        placement["tolerations"] = tolerations
    return placement


def _accelerator_resources(gpus: int, efa: int) -> dict[str, Any]:
    amounts: dict[str, int] = {"nvidia.com/gpu": gpus}
    if efa:
        amounts["vpc.amazonaws.com/efa"] = efa
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _shared_volume(config: Any) -> dict[str, Any]:
    fsx = config.storage.fsx_lustre
    if fsx.enabled:
        return {"name": "shared", "persistentVolumeClaim": {"claimName": fsx.pvc_name}}
    return {"name": "shared", "emptyDir": {}}


EMPTY_DIR_COMMENT = """\
# storage.fsx_lustre is disabled in the config: this emptyDir lives and dies with the pod, so checkpoints
# do not survive a move to another node and auto-resume starts from step 0. Enable storage.fsx_lustre
# (the storage stack then creates the claim) and render again to checkpoint on FSx for Lustre."""


def _dump(documents: list[dict[str, Any]], project: str, title: str) -> str:
    header = (
        f"# {title}\n"
        f"# Rendered by `hpctl render-examples` from the config of project {project}; edit the config or\n"
        "# hpctl/examples.py, not this file, then render again.\n"
    )
    body = "---\n".join(yaml.dump(d, Dumper=_Dumper, sort_keys=False, width=120) for d in documents)
    # Put the explanation right above the emptyDir volume it is about.
    body = re.sub(
        r"^( *)(- name: shared\n\1  emptyDir: \{\}\n)",
        lambda m: "".join(f"{m.group(1)}{line}\n" for line in EMPTY_DIR_COMMENT.splitlines()) + m.group(0),
        body,
        flags=re.MULTILINE,
    )
    return header + body


def training_job(config: Any, checkpoint_interval_minutes: float = CHECKPOINT_INTERVAL_MINUTES) -> list[dict[str, Any]]:
    group = gpu_group(config)
    gpus, efa = accelerators(group.instance_type)
    nodes = max(group.instance_count, 1)
    ns = namespace(config)
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
                _shared_volume(config),
                {"name": "train-script", "configMap": {"name": f"{TRAINING_JOB}-script"}},
                dict(SHM_VOLUME),
            ],
        },
    }
    replicas: dict[str, Any] = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": pod}}
    if nodes > 1:
        replicas["Worker"] = {"replicas": nodes - 1, "restartPolicy": "OnFailure", "template": pod}
    script = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{TRAINING_JOB}-script", "namespace": ns},
        "data": {"train.py": TRAIN_SCRIPT},
    }
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": TRAINING_JOB, "namespace": ns, "annotations": dict(AUTO_RESUME)},
        "spec": {"pytorchReplicaSpecs": replicas},
    }
    return [script, job]


def inference(config: Any) -> list[dict[str, Any]]:
    group = gpu_group(config)
    ns = namespace(config)
    labels = {"app": INFERENCE_APP}
    env = []
    mounts = [dict(SHM_MOUNT)]
    volumes: list[dict[str, Any]] = [dict(SHM_VOLUME)]
    if config.storage.fsx_lustre.enabled:
        # Model weights are downloaded once to the shared file system and reused by every replica.
        env.append({"name": "HF_HOME", "value": f"{SHARED_MOUNT}/huggingface"})
        mounts.append({"name": "shared", "mountPath": SHARED_MOUNT})
        volumes.append(_shared_volume(config))
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


def smoke_test(config: Any) -> list[dict[str, Any]]:
    group = gpu_group(config)
    gpus, efa = accelerators(group.instance_type)
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
        checks.append("grep -q 'Selected Provider is efa' /tmp/nccl.log  # NCCL went over EFA, not TCP")
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
    launcher = {
        "spec": {
            "nodeSelector": dict(HEALTHY_NODE),
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
        "metadata": {"name": SMOKE_TEST_JOB, "namespace": namespace(config)},
        "spec": {
            "slotsPerWorker": gpus,
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": launcher},
                # Two nodes: the test is about the network between them.
                "Worker": {"replicas": 2, "restartPolicy": "Never", "template": worker},
            },
        },
    }]


def render(config: Any, checkpoint_interval_minutes: float = CHECKPOINT_INTERVAL_MINUTES) -> dict[str, str]:
    """File name -> manifest text for ``config``; the training job checkpoints every ``checkpoint_interval_minutes``."""
    files: dict[str, str] = {}
    if not config.storage.fsx_lustre.enabled:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace(config)}}
        files["namespace.yaml"] = _dump(
            [ns], config.project, "The namespace of the examples (with FSx enabled the storage stack creates it).")
    files["pytorchjob-auto-resume.yaml"] = _dump(
        training_job(config, checkpoint_interval_minutes), config.project,
        "Distributed PyTorch training with HyperPod job auto-resume, checkpointing to the shared volume.")
    files["inference.yaml"] = _dump(
        inference(config), config.project, f"An OpenAI-compatible vLLM server for {INFERENCE_MODEL} and its Service.")
    title = "Smoke test: GPUs, EFA and an NCCL all_reduce across two nodes."
    group = gpu_group(config)
    if group.instance_count < 2:
        title += (f"\n# It needs 2 nodes of {group.instance_type}; instance group {group.name} has "
                  f"{group.instance_count}: raise its instance_count first.")
    files["nccl-smoke-test.yaml"] = _dump(smoke_test(config), config.project, title)
    return files


def write(files: dict[str, str], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
