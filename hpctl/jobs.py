"""The jobs this product renders, on the cluster: HyperPodPyTorchJob, PyTorchJob and MPIJob, read and written with
the official `kubernetes` client (hpctl/kube.py connects it). `hpctl jobs` (hpctl/commands/jobs.py) prints them.

Every answer is read as the API server's JSON (`_preload_content=False`), so records use the API's field names.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from hpctl import teams
from hpctl.errors import EXIT_AWS, HpctlError, UsageError
from hpctl.kube import REQUEST_TIMEOUT, api_error, is_not_found


class JobKind(NamedTuple):
    kind: str
    group: str
    version: str
    plural: str
    pod_label: str  # the label the operator puts on the job's pods, valued with the job's name


# HyperPodPyTorchJob: TRAINING_GROUP, API_VERSION, PLURAL and KIND of aws/sagemaker-hyperpod-cli@011ca927123e02b35a399
# 935bbb3ab1905fe33c7:src/sagemaker/hyperpod/training/hyperpod_pytorch_job.py, whose list_pods selects the job's
# pods with `HPJob=<name>`. PyTorchJob and MPIJob: the CRDs the dependencies chart installs (aws/sagemaker-hyperpod-
# cli@a00b22d17ea928a6e39a43bd2efdafe01b1005ea:helm_chart/HyperPodHelmChart/charts/training-operators/crds/
# pytorchjobs.kubeflow.org-CustomResourceDefinition.yaml, plural pytorchjobs, and charts/mpi-operator/templates/
# mpijob-crd.yaml, plural mpijobs; the versions hpctl/examples.py renders). Both operators label a job's pods
# training.kubeflow.org/job-name=<name> (kubeflow/training-operator@186ac6c6:pkg/apis/kubeflow.org/v1/
# common_types.go JobNameLabel; kubeflow/mpi-operator pkg/controller/mpi_job_controller.go defaultLabels, read at
# its default branch, not at the v0.5.0 the chart ships: unverified for that version).
HYPERPOD = JobKind("HyperPodPyTorchJob", "sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs", "HPJob")
PYTORCH = JobKind("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs", "training.kubeflow.org/job-name")
MPI = JobKind("MPIJob", "kubeflow.org", "v2beta1", "mpijobs", "training.kubeflow.org/job-name")
KINDS = {k.kind: k for k in (HYPERPOD, PYTORCH, MPI)}
assert set(KINDS) == teams.JOB_KINDS

# Which pod is a rank. PyTorchJob: the Master replica is RANK 0 and Worker i is RANK i+1 (kubeflow/training-operator
# @5fa872ff:pkg/controller.v1/pytorch/envvar.go setPodEnv), told apart by training.kubeflow.org/replica-type
# (lower case) and training.kubeflow.org/replica-index (common_types.go above). HyperPodPyTorchJob: the pods are
# named <job>-<replica spec name>-<index>: AWS's job template names its one replica spec `pod` (aws/sagemaker-
# hyperpod-cli@011ca927:hyperpod-pytorch-job-template/hyperpod_pytorch_job_template/v1_1/template.py), and its
# walkthrough lists the pods <job>-pod-0, <job>-pod-1 and reads the logs of `$JOB_NAME-pod-0` (examples/
# end_to_end_walkthrough/01-training-job-submission/00-pytorch-training-job.md). That index N is node rank N is
# how hpctl reads it; the operator's code is not public (unverified). MPIJob: mpirun in the launcher pod
# (training.kubeflow.org/job-role=launcher, mpi_job_controller.go defaultLabels) prints what every rank prints.
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
JOB_ROLE = "training.kubeflow.org/job-role"
_POD_INDEX = re.compile(r"-(\d+)$")


def available_kinds(config: Any) -> list[JobKind]:
    """The kinds the config's cluster has: HyperPodPyTorchJob only with addons.training_operator on."""
    return [k for k in KINDS.values() if k is not HYPERPOD or config.addons.training_operator.enabled]


def namespaces(config: Any, namespace: str | None, team: str | None, all_namespaces: bool) -> list[str] | None:
    """Where to look (None: every namespace): --namespace, --team's, else the examples' and every team's."""
    from hpctl.examples import namespace as examples_namespace
    from infra.config import team_namespace

    if all_namespaces:
        return None
    if namespace:
        return [namespace]
    where = teams.placement(config, team, None)
    if where is not None:
        return [where.namespace]
    found = [examples_namespace(config)]
    if config.addons.task_governance.enabled:
        found += [team_namespace(t.name) for t in config.addons.task_governance.teams]
    return found


def _raw(response: Any) -> dict[str, Any]:
    data = json.loads(response.data or b"{}")
    return data if isinstance(data, dict) else {}


class Cluster:
    """The API calls `hpctl jobs` makes, over one ApiClient."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)

    def list_jobs(self, kind: JobKind, ns: str | None) -> list[dict[str, Any]]:
        """The jobs of ``kind`` in ``ns`` (None: every namespace); none when the cluster lacks the kind's CRD."""
        try:
            if ns is None:
                body = self.custom.list_cluster_custom_object(kind.group, kind.version, kind.plural,
                                                              _request_timeout=REQUEST_TIMEOUT)
            else:
                body = self.custom.list_namespaced_custom_object(kind.group, kind.version, ns, kind.plural,
                                                                 _request_timeout=REQUEST_TIMEOUT)
        except Exception as error:
            if is_not_found(error):
                return []
            raise api_error(error, f"listing {kind.kind}s in {ns or 'every namespace'}") from None
        items = body.get("items") or []
        for item in items:  # a list's items carry no kind of their own (the API's list shape)
            item.setdefault("kind", kind.kind)
            item.setdefault("apiVersion", f"{kind.group}/{kind.version}")
        return list(items)

    def get_job(self, kind: JobKind, ns: str, name: str) -> dict[str, Any] | None:
        try:
            job = self.custom.get_namespaced_custom_object(kind.group, kind.version, ns, kind.plural, name,
                                                           _request_timeout=REQUEST_TIMEOUT)
        except Exception as error:
            if is_not_found(error):
                return None
            raise api_error(error, f"reading {kind.kind} {ns}/{name}") from None
        return dict(job)

    def pods(self, ns: str | None, selector: str) -> list[dict[str, Any]]:
        try:
            if ns is None:
                response = self.core.list_pod_for_all_namespaces(label_selector=selector, _preload_content=False,
                                                                 _request_timeout=REQUEST_TIMEOUT)
            else:
                response = self.core.list_namespaced_pod(ns, label_selector=selector, _preload_content=False,
                                                          _request_timeout=REQUEST_TIMEOUT)
        except Exception as error:
            raise api_error(error, f"listing pods in {ns or 'every namespace'}") from None
        return list(_raw(response).get("items") or [])

    def events(self, ns: str) -> list[dict[str, Any]]:
        try:
            response = self.core.list_namespaced_event(ns, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
        except Exception as error:
            raise api_error(error, f"listing events in {ns}") from None
        return list(_raw(response).get("items") or [])

    def create(self, doc: dict[str, Any]) -> str:
        """Create one object of the kinds `jobs submit` takes; returns what happened ("created", "kept", ...)."""
        kind, metadata = doc.get("kind"), doc.get("metadata") or {}
        ns, name = metadata.get("namespace"), metadata.get("name")
        what = f"creating {kind} {ns + '/' if ns else ''}{name}"
        try:
            if kind in KINDS:
                job = KINDS[kind]
                self.custom.create_namespaced_custom_object(job.group, job.version, ns, job.plural, doc,
                                                            _request_timeout=REQUEST_TIMEOUT)
                return "created"
            create = {
                "Namespace": lambda: self.core.create_namespace(doc, _request_timeout=REQUEST_TIMEOUT),
                "PersistentVolume": lambda: self.core.create_persistent_volume(doc, _request_timeout=REQUEST_TIMEOUT),
                "PersistentVolumeClaim": lambda: self.core.create_namespaced_persistent_volume_claim(
                    ns, doc, _request_timeout=REQUEST_TIMEOUT),
                "ConfigMap": lambda: self.core.create_namespaced_config_map(ns, doc, _request_timeout=REQUEST_TIMEOUT),
            }[str(kind)]
            create()
            return "created"
        except Exception as error:
            from kubernetes.client.exceptions import ApiException

            conflict = isinstance(error, ApiException) and error.status == 409
            if conflict and kind in KINDS:
                raise HpctlError(f"{kind} {ns}/{name} already exists: delete it first "
                                 f"(hpctl jobs delete {name} --namespace {ns})") from None
            if not conflict:
                raise api_error(error, what) from None
        if kind == "ConfigMap":  # the job's script: the one in the file wins
            try:
                self.core.replace_namespaced_config_map(name, ns, doc, _request_timeout=REQUEST_TIMEOUT)
            except Exception as error:
                raise api_error(error, f"replacing ConfigMap {ns}/{name}") from None
            return "replaced"
        return "exists, kept"

    def delete_job(self, kind: JobKind, ns: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(kind.group, kind.version, ns, kind.plural, name,
                                                        _request_timeout=REQUEST_TIMEOUT)
        except Exception as error:
            raise api_error(error, f"deleting {kind.kind} {ns}/{name}") from None

    def log_stream(self, pod: dict[str, Any], follow: bool, tail: int | None) -> Iterator[bytes]:
        """The pod's log (its first container), chunk by chunk as the API server sends it."""
        metadata = pod["metadata"]
        containers = (pod.get("spec") or {}).get("containers") or [{}]
        kwargs: dict[str, Any] = {"follow": follow, "_preload_content": False}
        if len(containers) > 1:
            kwargs["container"] = containers[0].get("name")
        if tail is not None:
            kwargs["tail_lines"] = tail
        if not follow:
            kwargs["_request_timeout"] = REQUEST_TIMEOUT
        try:
            response = self.core.read_namespaced_pod_log(metadata["name"], metadata["namespace"], **kwargs)
        except Exception as error:
            raise api_error(error, f"reading the log of pod {metadata['namespace']}/{metadata['name']}") from None
        try:
            yield from response.stream(4096, decode_content=True)
        finally:
            response.release_conn()


def job_status(job: dict[str, Any]) -> str:
    """The newest condition that holds (Created, Running, Restarting, Succeeded, Failed, Suspended: the operators'
    JobConditionType), or Pending before the operator has set any. AWS's CLI also takes the condition of the latest
    lastTransitionTime (aws/sagemaker-hyperpod-cli@011ca927:src/sagemaker/hyperpod/cli/service/
    list_training_jobs.py, _get_job_status); here a condition whose status is not True does not count."""
    conditions = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    if not conditions:
        return "Pending"
    newest = max(enumerate(conditions), key=lambda ic: (str(ic[1].get("lastTransitionTime") or ""), ic[0]))[1]
    return str(newest.get("type") or "Unknown")


def restarts(job: dict[str, Any]) -> int | None:
    """HyperPod's restart count of a HyperPodPyTorchJob (status.restartCount: HyperPodPytorchJobStatus in
    aws/sagemaker-hyperpod-cli@011ca927:src/sagemaker/hyperpod/training/config/hyperpod_pytorch_job_unified_config.py).
    None for a PyTorchJob or MPIJob: their status has no count (JobStatus, common_types.go above)."""
    if job.get("kind") != HYPERPOD.kind:
        return None
    return int((job.get("status") or {}).get("restartCount") or 0)


def _parse_time(text: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def age(created: Any, now: dt.datetime | None = None) -> str | None:
    """5s, 12m, 3h4m, 2d5h: how long ago ``created`` (RFC 3339) was."""
    when = _parse_time(created)
    if when is None:
        return None
    seconds = max(0, int(((now or dt.datetime.now(dt.UTC)) - when).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m" if minutes else f"{seconds}s"


def team_of(ns: str) -> str | None:
    from infra.config.addons import TEAM_NAMESPACE_PREFIX

    return ns[len(TEAM_NAMESPACE_PREFIX):] if ns.startswith(TEAM_NAMESPACE_PREFIX) else None


def pods_of(kind: JobKind, job: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    name, ns = job["metadata"]["name"], job["metadata"].get("namespace")
    return [p for p in pods if (p["metadata"].get("labels") or {}).get(kind.pod_label) == name
            and p["metadata"].get("namespace") == ns]


def record(job: dict[str, Any], pods: list[dict[str, Any]], now: dt.datetime | None = None) -> dict[str, Any]:
    """One job as `jobs list` shows it."""
    metadata = job["metadata"]
    labels = metadata.get("labels") or {}
    ns = str(metadata.get("namespace") or "")
    return {
        "name": metadata.get("name"),
        "kind": job.get("kind"),
        "namespace": ns,
        "team": team_of(ns),
        "queue": labels.get(teams.QUEUE_LABEL),
        "priority_class": labels.get(teams.PRIORITY_CLASS_LABEL),
        "status": job_status(job),
        "restarts": restarts(job),
        "created": metadata.get("creationTimestamp"),
        "age": age(metadata.get("creationTimestamp"), now),
        "nodes": sorted({str(p["spec"]["nodeName"]) for p in pods if (p.get("spec") or {}).get("nodeName")}),
    }


def list_records(cluster: Cluster, config: Any, where: list[str] | None) -> list[dict[str, Any]]:
    """Every job of the available kinds in ``where``, with its pods' nodes."""
    kinds = available_kinds(config)
    jobs = [(kind, job) for kind in kinds for ns in (where or [None]) for job in cluster.list_jobs(kind, ns)]
    pods: list[dict[str, Any]] = []
    for label in dict.fromkeys(k.pod_label for k in kinds):  # one listing per label: the kubeflow kinds share one
        if any(kind.pod_label == label for kind, _ in jobs):
            pods += [p for ns in (where or [None]) for p in cluster.pods(ns, label)]
    return sorted((record(job, pods_of(kind, job, pods)) for kind, job in jobs),
                  key=lambda r: (r["namespace"], r["name"], r["kind"]))


def find(cluster: Cluster, config: Any, name: str, where: list[str] | None,
         kind: str | None = None) -> tuple[JobKind, dict[str, Any]]:
    """The one job called ``name`` (of ``kind``) in ``where``; exit 3 when none, UsageError when several."""
    return find_object(cluster, name, where, [KINDS[kind]] if kind else available_kinds(config), kind or "job",
                       "hpctl jobs list")


def find_object(cluster: Cluster, name: str, where: list[str] | None, kinds: list[JobKind], noun: str,
                lister: str) -> tuple[JobKind, dict[str, Any]]:
    """The one custom object called ``name`` of ``kinds`` in ``where`` (None: every namespace); exit 3 naming
    ``lister`` when none, UsageError when several (jobs and hpctl/endpoints.py share it)."""
    found: list[tuple[JobKind, dict[str, Any]]] = []
    for job_kind in kinds:
        if where is None:
            found += [(job_kind, j) for j in cluster.list_jobs(job_kind, None) if j["metadata"].get("name") == name]
            continue
        for ns in where:
            job = cluster.get_job(job_kind, ns, name)
            if job is not None:
                job.setdefault("kind", job_kind.kind)
                found.append((job_kind, job))
    if not found:
        places = ", ".join(where) if where else "any namespace"
        raise HpctlError(f"no {noun} {name!r} in {places} ({', '.join(k.kind for k in kinds)}); "
                         f"pass --namespace or --team, or list them with {lister}", EXIT_AWS)
    if len(found) > 1:
        many = ", ".join(f"{k.kind} {j['metadata'].get('namespace')}/{name}" for k, j in found)
        raise UsageError(f"{name!r} names several {noun}s ({many}): pass --kind or --namespace")
    return found[0]


def rank_pod(kind: JobKind, job: dict[str, Any], pods: list[dict[str, Any]], rank: int | None) -> dict[str, Any]:
    """The pod whose log is rank ``rank``'s (None: rank 0); UsageError naming the pods there are otherwise."""
    name = job["metadata"]["name"]
    if kind is MPI:
        if rank not in (None, 0):
            raise UsageError("an MPIJob's ranks all print through mpirun in its launcher: leave out --rank")
        chosen = [p for p in pods if (p["metadata"].get("labels") or {}).get(JOB_ROLE) == "launcher"]
    elif kind is PYTORCH:
        n = rank or 0
        replicas = {((p["metadata"].get("labels") or {}).get(REPLICA_TYPE),
                     (p["metadata"].get("labels") or {}).get(REPLICA_INDEX)): p for p in pods}
        has_master = any(t == "master" for t, _ in replicas)
        wanted = ("master", "0") if has_master and n == 0 else ("worker", str(n - 1 if has_master else n))
        chosen = [replicas[wanted]] if wanted in replicas else []
    else:
        n = rank or 0
        chosen = [p for p in pods if (m := _POD_INDEX.search(p["metadata"]["name"])) and int(m[1]) == n]
    if not chosen:
        have = ", ".join(sorted(p["metadata"]["name"] for p in pods)) or "none yet"
        raise HpctlError(f"{kind.kind} {name} has no pod for rank {rank or 0} (its pods: {have})")
    return sorted(chosen, key=lambda p: str(p["metadata"].get("creationTimestamp") or ""))[-1]


def faulty_instances(job: dict[str, Any]) -> list[str]:
    """The instances HyperPod blamed for the latest restart of a HyperPodPyTorchJob (status.
    latestFaultyPodInstanceList.faultyInstanceIdList, the model named in restarts())."""
    latest = (job.get("status") or {}).get("latestFaultyPodInstanceList") or {}
    return [str(i) for i in latest.get("faultyInstanceIdList") or []]
