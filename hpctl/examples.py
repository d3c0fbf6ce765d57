"""Kubernetes manifests for data scientists, rendered from the app's config so they match the deployed cluster.

`hpctl render-examples` writes them; the rendering of config/default.yaml is kept in examples/ and a test
fails when it is stale. Names, the namespace, the claim of the shared file system and the instance type
come from the config; images are pinned here.
"""

from __future__ import annotations

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
