"""Task governance for jobs: the namespace, Kueue queue and priority class of a team of the config.

`render-examples --team` and `hpctl jobs submit --team` place a job with `placement()` and `apply()`.

What AWS's sources write, read at aws/sagemaker-hyperpod-cli@011ca927123e02b35a399935bbb3ab1905fe33c7:
- src/sagemaker/hyperpod/cli/constants/command_constants.py: the label keys KUEUE_QUEUE_NAME_LABEL_KEY
  "kueue.x-k8s.io/queue-name" and KUEUE_WORKLOAD_PRIORITY_CLASS_LABEL_KEY "kueue.x-k8s.io/priority-class", the
  namespace prefix HYPERPOD_NAMESPACE_PREFIX "hyperpod-ns-" and SAGEMAKER_MANAGED_LOCAL_QUEUE_SUFFIX "-localqueue"
  (the team's LocalQueue is hyperpod-ns-<team>-localqueue, as examples/end_to_end_walkthrough/03-task-governance/
  00-task-governance.md sets TEAM_QUEUE=$TEAM_NAMESPACE-localqueue).
- the priority class label's value is the scheduler policy's class name followed by "-priority": the walkthrough's
  cluster policy has `PriorityClasses=[...{Name=training,Weight=70}]` (00-getting-started/00-setup.md) and its jobs
  are labelled with JOB_PRIO=training-priority (03-task-governance/00-task-governance.md).
- hyperpod-pytorch-job-template/hyperpod_pytorch_job_template/v1_1/template.py writes both labels on the job's
  metadata and on its pod template's metadata; `apply()` does the same for every job kind.
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

from hpctl.errors import UsageError

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
LOCAL_QUEUE_SUFFIX = "-localqueue"
PRIORITY_CLASS_SUFFIX = "-priority"
# The job kinds this product renders and `hpctl jobs` manages (hpctl/examples.py, hpctl/jobs.py).
JOB_KINDS = frozenset({"HyperPodPyTorchJob", "PyTorchJob", "MPIJob"})


class Placement(NamedTuple):
    """Where a team's job goes and the labels that put it in the team's queue."""

    team: str
    namespace: str
    labels: dict[str, str]


def local_queue(namespace: str) -> str:
    return namespace + LOCAL_QUEUE_SUFFIX


def placement(config: Any, team: str | None, priority: str | None) -> Placement | None:
    """The team's placement, or None without --team; UsageError (one line) for an unknown team or priority class,
    naming the valid ones, and for --team without task governance."""
    from infra.config import team_namespace

    if team is None:
        if priority is not None:
            raise UsageError("--priority needs --team: a priority class orders the jobs of a team's queue")
        return None
    governance = config.addons.task_governance
    if not governance.enabled:
        raise UsageError("--team needs addons.task_governance in the config (it is off): without it there are no "
                         "team namespaces or queues")
    teams = [t.name for t in governance.teams]
    if team not in teams:
        raise UsageError(f"unknown team {team!r}: addons.task_governance.teams has "
                         f"{', '.join(teams) if teams else 'no team'}")
    namespace = team_namespace(team)
    labels = {QUEUE_LABEL: local_queue(namespace)}
    if priority is not None:
        classes = [c.name for c in governance.priority_classes]
        if priority not in classes:
            raise UsageError(f"unknown priority class {priority!r}: addons.task_governance.priority_classes has "
                             f"{', '.join(classes) if classes else 'none'}")
        labels[PRIORITY_CLASS_LABEL] = priority + PRIORITY_CLASS_SUFFIX
    return Placement(team, namespace, labels)


def pod_templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a HyperPodPyTorchJob (spec.replicaSpecs[]), PyTorchJob (spec.pytorchReplicaSpecs) or
    MPIJob (spec.mpiReplicaSpecs); none for another kind."""
    spec = doc.get("spec") or {}
    if doc.get("kind") == "HyperPodPyTorchJob":
        replicas = list(spec.get("replicaSpecs") or [])
    else:
        replicas = list((spec.get("pytorchReplicaSpecs") or spec.get("mpiReplicaSpecs") or {}).values())
    return [r["template"] for r in replicas if isinstance(r, dict) and isinstance(r.get("template"), dict)]


def apply(doc: dict[str, Any], where: Placement) -> dict[str, Any]:
    """``doc`` moved to the team's namespace; a job (of JOB_KINDS) also gets the queue labels, on itself and on
    its pod templates. A Namespace is returned as it is. A static volume and its claim, named as render-examples
    names them (the volume `<namespace>-<claim>`, hpctl/examples.py s3_volumes), move together: the volume is
    renamed for the team's namespace and bound to the claim there, so the team's claim never waits for a volume
    that another namespace's claim holds."""
    if doc.get("kind") == "Namespace":
        return doc
    placed = copy.deepcopy(doc)
    metadata = placed.setdefault("metadata", {})
    spec = placed.get("spec") or {}
    if doc.get("kind") == "PersistentVolume":
        claim = spec.get("claimRef") or {}
        if claim.get("namespace") and metadata.get("name") == f"{claim['namespace']}-{claim.get('name')}":
            metadata["name"] = f"{where.namespace}-{claim.get('name')}"
        if claim:
            claim["namespace"] = where.namespace
        return placed
    if doc.get("kind") == "PersistentVolumeClaim" and spec.get("volumeName") == \
            f"{metadata.get('namespace')}-{metadata.get('name')}":
        spec["volumeName"] = f"{where.namespace}-{metadata.get('name')}"
    metadata["namespace"] = where.namespace
    if doc.get("kind") in JOB_KINDS:
        metadata["labels"] = {**(metadata.get("labels") or {}), **where.labels}
        for template in pod_templates(placed):
            labels = template.setdefault("metadata", {}).get("labels") or {}
            template["metadata"]["labels"] = {**labels, **where.labels}
    return placed
