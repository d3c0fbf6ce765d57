"""hpctl jobs and monitoring: the kubernetes client's own REST layer against a fake API server on 127.0.0.1.

The fake server answers with the shapes of the Kubernetes API: lists are {"apiVersion", "kind": "<Kind>List",
"metadata", "items"} (kubernetes/api@10b39a39:core/v1/types.go PodList, EventList), errors a Status object
(kind Status, status Failure, reason, message, code: the client's V1Status model), pods and events with the fields
of core/v1 Pod (metadata.labels, spec.nodeName, status.phase, status.containerStatuses[].restartCount) and Event
(involvedObject, type, reason, message, lastTimestamp). Custom objects are the JSON the operators store.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hpctl_testkit import CLUSTER, CLUSTER_ARN, REGION, config_data, stubbed
from kube_fake import EKS_ARN, EKS_NAME, aws_clients, aws_clients_and_stub, listing

from hpctl import examples
from hpctl.commands import terminal
from infra.config import parse_config

TEAM_NS = "hyperpod-ns-research"
T0 = "2026-12-04T10:00:00Z"
S3_BUCKET = {"enabled": True, "bucket_arns": ["arn:aws:s3:::ckpt"]}


def pytorch_job(name: str, ns: str, conditions: list[dict[str, Any]], labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": T0, "labels": labels or {}},
            "spec": {"pytorchReplicaSpecs": {}}, "status": {"conditions": conditions}}


def condition(kind: str, when: str, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": f"PyTorchJob{kind}", "message": f"job is {kind.lower()}",
            "lastUpdateTime": when, "lastTransitionTime": when}


def pod(name: str, ns: str, labels: dict[str, str], node: str | None, restarts: int = 0) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "creationTimestamp": T0},
            "spec": {"nodeName": node, "containers": [{"name": "pytorch", "image": "x"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "pytorch", "restartCount": restarts,
                                                                  "ready": True, "image": "x", "imageID": "",
                                                                  "started": True}]}}


def governed_config(**addons: Any) -> dict[str, Any]:
    data = config_data()
    data["addons"] = {
        "task_governance": {
            "enabled": True,
            "priority_classes": [{"name": "training", "weight": 70}, {"name": "inference", "weight": 90}],
            "teams": [{"name": "research", "quota": {"instance_type": "ml.g5.8xlarge", "count": 1}}],
        },
        **addons,
    }
    return data


@pytest.fixture
def governed(write_config: Any) -> Path:
    return write_config(governed_config())


# --- team queues ---------------------------------------------------------------------------------------------------


def test_submit_puts_the_job_in_the_team_namespace_and_queue_with_aws_labels(run, governed, fake, kubeconfig,
                                                                             tmp_path) -> None:
    files = examples.render(parse_config(governed_config(s3_csi=S3_BUCKET), "t"))
    manifest = tmp_path / "train.yaml"
    manifest.write_text(files[examples.TRAINING_FILE])
    fake.on("POST", f"/api/v1/namespaces/{TEAM_NS}/configmaps", {"kind": "ConfigMap"}, 201)
    fake.on("POST", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs", {"kind": "PyTorchJob"}, 201)
    code, out, err = run("jobs", "submit", str(manifest), "--team", "research", "--priority", "training",
                         "--config", str(governed), clients=aws_clients(fake.url))
    assert code == 0, err
    configmap, job = (r["body"] for r in fake.sent("POST"))
    assert configmap["metadata"]["namespace"] == TEAM_NS
    assert job["metadata"]["namespace"] == TEAM_NS
    wanted = {"kueue.x-k8s.io/queue-name": "hyperpod-ns-research-localqueue",
              "kueue.x-k8s.io/priority-class": "training-priority"}
    assert wanted.items() <= job["metadata"]["labels"].items()
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        assert wanted.items() <= replica["template"]["metadata"]["labels"].items()
    assert all(r["authorization"] == "Bearer k8s-aws-v1.test-token" for r in fake.requests)
    assert "hyperpod-ns-research-localqueue" in out and "created" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--team", "nobody"], "unknown team 'nobody': addons.task_governance.teams has research"),
    (["--team", "research", "--priority", "urgent"],
     "unknown priority class 'urgent': addons.task_governance.priority_classes has training, inference"),
    (["--priority", "training"], "--priority needs --team"),
])
def test_an_unknown_team_or_priority_is_refused_naming_the_valid_ones(run, governed, tmp_path, argv, message) -> None:
    for command in (["render-examples"], ["jobs", "submit", str(tmp_path / "x.yaml")]):
        code, out, err = run(*command, *argv, "--config", str(governed))
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and message in err


def test_team_without_task_governance_is_refused_in_one_line(run, config_file, tmp_path) -> None:
    for command in (["render-examples"], ["jobs", "submit", str(tmp_path / "x.yaml")]):
        code, _, err = run(*command, "--team", "research", "--config", str(config_file))
        assert code == 2
        assert err == "hpctl: --team needs addons.task_governance in the config (it is off): without it there are " \
                      "no team namespaces or queues\n"


def test_render_examples_for_a_team_labels_every_job_and_moves_every_manifest(run, write_config) -> None:
    config = write_config(governed_config(s3_csi=S3_BUCKET))
    code, out, _ = run("render-examples", "--team", "research", "--priority", "inference", "--config", str(config))
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert "Namespace" not in {d["kind"] for d in docs}  # task governance made the team's namespace
    for doc in docs:
        if doc["kind"] != "PersistentVolume":
            assert doc["metadata"]["namespace"] == TEAM_NS, doc["kind"]
        if doc["kind"] in ("PyTorchJob", "MPIJob"):
            assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "hyperpod-ns-research-localqueue"
            assert doc["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "inference-priority"
    # The checkpoints go to the team's own claim of the S3 bucket, bound to a volume made for that namespace.
    job = next(d for d in docs if d["kind"] == "PyTorchJob")
    volumes = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"]
    assert {"name": "shared", "persistentVolumeClaim": {"claimName": "s3-ckpt"}} in volumes
    pv = next(d for d in docs if d["kind"] == "PersistentVolume")
    assert pv["spec"]["claimRef"] == {"namespace": TEAM_NS, "name": "s3-ckpt"}


# --- checkpoints on the default config -----------------------------------------------------------------------------


def test_default_config_gets_no_auto_resume_job_and_is_told_why(run, config_file, tmp_path) -> None:
    code, out, err = run("render-examples", "--config", str(config_file), "--out", str(tmp_path / "o"), "--json")
    assert code == 0
    assert examples.TRAINING_FILE not in {p.name for p in (tmp_path / "o").iterdir()}
    reason = json.loads(out)["not_rendered"][0]["reason"]
    assert "storage.fsx_lustre" in reason and "addons.s3_csi" in reason
    assert err.count("\n") == 1 and "checkpoints would die with the pod" in err


def test_with_s3_csi_the_auto_resume_job_checkpoints_to_the_bucket(write_config, run) -> None:
    config = write_config({**config_data(), "addons": {"s3_csi": S3_BUCKET}})
    code, out, err = run("render-examples", "--config", str(config))
    assert code == 0 and err == ""
    docs = [d for d in yaml.safe_load_all(out) if d]
    job = next(d for d in docs if d["kind"] == "PyTorchJob")
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        assert {"name": "shared", "persistentVolumeClaim": {"claimName": "s3-ckpt"}} in \
            replica["template"]["spec"]["volumes"]
    claim = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")
    assert claim["metadata"] == {"name": "s3-ckpt", "namespace": "training"}
    # Mountpoint does not rename (awslabs/mountpoint-s3 doc/SEMANTICS.md): each checkpoint is a new file.
    assert "os.replace(" not in examples.TRAIN_SCRIPT and "os.rename(" not in examples.TRAIN_SCRIPT


# --- the fake API server: list, describe, logs, delete -------------------------------------------------------------


def test_list_shows_kind_team_status_age_and_nodes_from_the_api(run, governed, fake, kubeconfig) -> None:
    running = pytorch_job("train", TEAM_NS, [condition("Created", "2026-12-04T10:00:01Z"),
                                             condition("Running", "2026-12-04T10:02:00Z")],
                          {"kueue.x-k8s.io/queue-name": "hyperpod-ns-research-localqueue"})
    fake.on("GET", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs", listing("PyTorchJob", [running],
                                                                                     "kubeflow.org/v1"))
    fake.on("GET", f"/apis/kubeflow.org/v2beta1/namespaces/{TEAM_NS}/mpijobs",
            listing("MPIJob", [], "kubeflow.org/v2beta1"))
    fake.on("GET", f"/api/v1/namespaces/{TEAM_NS}/pods", listing("Pod", [
        pod("train-master-0", TEAM_NS, {"training.kubeflow.org/job-name": "train"}, "hyperpod-i-0aaa"),
        pod("train-worker-0", TEAM_NS, {"training.kubeflow.org/job-name": "train"}, "hyperpod-i-0bbb"),
        pod("other-master-0", TEAM_NS, {"training.kubeflow.org/job-name": "other"}, "hyperpod-i-0ccc"),
    ]))
    code, data = run.json("jobs", "list", "--team", "research", "--config", str(governed),
                          clients=aws_clients(fake.url))
    assert code == 0
    (job,) = data
    assert {k: job[k] for k in ("name", "kind", "namespace", "team", "status", "restarts", "nodes", "queue")} == {
        "name": "train", "kind": "PyTorchJob", "namespace": TEAM_NS, "team": "research", "status": "Running",
        "restarts": None, "nodes": ["hyperpod-i-0aaa", "hyperpod-i-0bbb"],
        "queue": "hyperpod-ns-research-localqueue"}
    pods = [r for r in fake.sent("GET") if r["path"].endswith("/pods")]
    assert pods[0]["query"]["labelSelector"] == ["training.kubeflow.org/job-name"]


def test_list_of_a_hyperpod_job_shows_its_restart_count(run, write_config, fake, kubeconfig) -> None:
    config = write_config({**config_data(), "addons": {"training_operator": {"enabled": True}}})
    job = {"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
           "metadata": {"name": "hp", "namespace": "training", "creationTimestamp": T0},
           "status": {"restartCount": 2, "conditions": [condition("Running", "2026-12-04T10:01:00Z")]}}
    fake.on("GET", "/apis/sagemaker.amazonaws.com/v1/namespaces/training/hyperpodpytorchjobs",
            listing("HyperPodPyTorchJob", [job], "sagemaker.amazonaws.com/v1"))
    fake.on("GET", "/api/v1/namespaces/training/pods", listing("Pod", [
        pod("hp-pod-0", "training", {"HPJob": "hp"}, "hyperpod-i-0aaa")]))
    code, out, _ = run("jobs", "list", "--config", str(config), clients=aws_clients(fake.url))
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["NAME", "KIND", "TEAM/NAMESPACE", "STATUS", "RESTARTS", "AGE", "NODES"]
    assert row.split()[:5] == ["hp", "HyperPodPyTorchJob", "training", "Running", "2"]
    assert row.split()[-1] == "hyperpod-i-0aaa"


def test_a_context_of_another_cluster_is_refused_before_anything_is_sent(run, governed, fake, kubeconfig) -> None:
    code, _, err = run("jobs", "list", "--config", str(governed),
                       clients=aws_clients("https://ABC.gr7.us-west-2.eks.amazonaws.com"))
    assert code == 2
    assert "not the EKS cluster hp-eks" in err and err.count("\n") == 1
    assert fake.requests == []


def test_a_refusal_of_the_api_server_is_one_line_and_exit_3(run, governed, fake, kubeconfig) -> None:
    forbidden = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Forbidden",
                 "message": 'pytorchjobs.kubeflow.org is forbidden: User "me" cannot list resource "pytorchjobs"',
                 "code": 403}
    fake.on("GET", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs", forbidden, 403)
    code, out, err = run("jobs", "list", "--team", "research", "--config", str(governed),
                         clients=aws_clients(fake.url))
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and "403 Forbidden" in err and "cannot list resource" in err


def test_describe_adds_events_and_the_hyperpod_faults_of_its_nodes(run, governed, fake, kubeconfig) -> None:
    job = pytorch_job("train", TEAM_NS, [condition("Restarting", "2026-12-04T10:05:00Z")])
    fake.on("GET", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs/train", job)
    fake.on("GET", f"/api/v1/namespaces/{TEAM_NS}/pods", listing("Pod", [
        pod("train-master-0", TEAM_NS, {"training.kubeflow.org/job-name": "train"}, "hyperpod-i-0aaa", restarts=1)]))
    fake.on("GET", f"/api/v1/namespaces/{TEAM_NS}/events", listing("Event", [
        {"metadata": {"name": "e1", "namespace": TEAM_NS}, "involvedObject": {"kind": "Pod", "name": "train-master-0"},
         "type": "Warning", "reason": "BackOff", "message": "Back-off restarting failed container",
         "lastTimestamp": "2026-12-04T10:04:00Z", "count": 3},
        {"metadata": {"name": "e2", "namespace": TEAM_NS}, "involvedObject": {"kind": "Pod", "name": "unrelated"},
         "type": "Normal", "reason": "Pulled", "message": "x", "lastTimestamp": "2026-12-04T10:03:00Z"},
    ]))
    clients, stub = aws_clients_and_stub(fake.url)
    # hpctl events' source: ListClusterEvents of the node since the job was created (botocore's ClusterEventSummary).
    events = [cluster_event("ev-1", 4, "Error", "GPU health check failed: the node is replaced"),
              cluster_event("ev-2", 3, "Info", "routine")]
    stub.add_response("list_cluster_events", {"Events": events}, {
        "ClusterName": CLUSTER, "SortBy": "EventTime", "SortOrder": "Descending", "MaxResults": 100,
        "EventTimeAfter": dt.datetime(2026, 12, 4, 10, 0, tzinfo=dt.UTC), "NodeId": "i-0aaa"})
    code, data = run.json("jobs", "describe", "train", "--team", "research", "--config", str(governed),
                          clients=clients)
    stub.assert_no_pending_responses()
    assert code == 0
    assert data["status"] == "Restarting"
    assert [e["reason"] for e in data["events"]] == ["BackOff"]
    assert [f["description"] for f in data["node_faults"]] == ["GPU health check failed: the node is replaced"]
    assert data["pods"] == [{"pod": "train-master-0", "node": "hyperpod-i-0aaa", "phase": "Running",
                             "container_restarts": 1}]


def cluster_event(event_id: str, minute: int, level: str, description: str) -> dict[str, Any]:
    """A ListClusterEvents entry of node i-0aaa (botocore's sagemaker model, ClusterEventSummary)."""
    return {"EventId": event_id, "ClusterArn": CLUSTER_ARN, "ClusterName": CLUSTER, "InstanceGroupName": "workers",
            "InstanceId": "i-0aaa", "ResourceType": "Instance",
            "EventTime": dt.datetime(2026, 12, 4, 10, minute, tzinfo=dt.UTC), "EventLevel": level,
            "Description": description}


@pytest.mark.parametrize(("rank", "wanted"), [(None, "train-master-0"), ("1", "train-worker-0"),
                                              ("2", "train-worker-1")])
def test_logs_read_the_pod_of_the_rank(run, governed, fake, kubeconfig, rank, wanted) -> None:
    fake.on("GET", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs/train", pytorch_job("train", TEAM_NS, []))
    labels = {"training.kubeflow.org/job-name": "train"}
    fake.on("GET", f"/api/v1/namespaces/{TEAM_NS}/pods", listing("Pod", [
        pod(f"train-{t}-{i}", TEAM_NS, {**labels, "training.kubeflow.org/replica-type": t,
                                        "training.kubeflow.org/replica-index": str(i)}, "hyperpod-i-0aaa")
        for t, i in (("master", 0), ("worker", 0), ("worker", 1))]))
    for name in ("train-master-0", "train-worker-0", "train-worker-1"):
        fake.on("GET", f"/api/v1/namespaces/{TEAM_NS}/pods/{name}/log", f"step 1 from {name}\nstep 2 from {name}\n")
    code, out, err = run("jobs", "logs", "train", "--team", "research", "--follow", *(["--rank", rank] if rank else []),
                         "--config", str(governed), clients=aws_clients(fake.url))
    assert code == 0, err
    assert out == f"step 1 from {wanted}\nstep 2 from {wanted}\n"
    (log,) = [r for r in fake.requests if r["path"].endswith("/log")]
    assert log["query"]["follow"] == ["true"]


def test_logs_of_a_rank_without_a_pod_name_the_pods_there_are(run, governed, fake, kubeconfig) -> None:
    fake.on("GET", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs/train", pytorch_job("train", TEAM_NS, []))
    fake.on("GET", f"/api/v1/namespaces/{TEAM_NS}/pods", listing("Pod", [pod(
        "train-master-0", TEAM_NS, {"training.kubeflow.org/job-name": "train",
                                    "training.kubeflow.org/replica-type": "master",
                                    "training.kubeflow.org/replica-index": "0"}, None)]))
    code, _, err = run("jobs", "logs", "train", "--team", "research", "--rank", "3", "--config", str(governed),
                       clients=aws_clients(fake.url))
    assert code == 1
    assert "no pod for rank 3 (its pods: train-master-0)" in err


def test_delete_asks_first_and_sends_nothing_when_refused(run, governed, fake, kubeconfig, monkeypatch) -> None:
    fake.on("GET", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs/train", pytorch_job("train", TEAM_NS, []))
    fake.on("DELETE", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs/train",
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 200})
    asked: list[str] = []
    monkeypatch.setattr(terminal, "_stdin_is_terminal", lambda: True)
    monkeypatch.setattr(terminal, "_ask", lambda prompt: asked.append(prompt) or "n")
    code, _, err = run("jobs", "delete", "train", "--team", "research", "--config", str(governed),
                       clients=aws_clients(fake.url))
    assert code == 1 and "aborted" in err
    assert "Delete PyTorchJob hyperpod-ns-research/train" in asked[0]
    assert fake.sent("DELETE") == []
    monkeypatch.setattr(terminal, "_ask", lambda prompt: "y")
    code, data = run.json("jobs", "delete", "train", "--team", "research", "--config", str(governed),
                          clients=aws_clients(fake.url))
    assert code == 0 and data == {"deleted": {"kind": "PyTorchJob", "namespace": TEAM_NS, "name": "train"}}
    assert len(fake.sent("DELETE")) == 1


def test_delete_without_a_terminal_needs_yes(run, governed, fake, kubeconfig, monkeypatch) -> None:
    fake.on("GET", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs/train", pytorch_job("train", TEAM_NS, []))
    monkeypatch.setattr(terminal, "_stdin_is_terminal", lambda: False)
    code, _, err = run("jobs", "delete", "train", "--team", "research", "--config", str(governed),
                       clients=aws_clients(fake.url))
    assert code == 2 and "pass --yes" in err
    assert fake.sent("DELETE") == []


def test_a_missing_job_is_exit_3_naming_where_it_looked(run, governed, fake, kubeconfig) -> None:
    code, _, err = run("jobs", "describe", "gone", "--team", "research", "--config", str(governed),
                       clients=aws_clients(fake.url))
    assert code == 3 and f"no job 'gone' in {TEAM_NS}" in err


def test_submitting_a_job_that_exists_says_to_delete_it_first(run, governed, fake, kubeconfig, tmp_path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(pytorch_job("train", "training", [])))
    fake.on("POST", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs",
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "AlreadyExists",
             "message": 'pytorchjobs.kubeflow.org "train" already exists', "code": 409}, 409)
    code, _, err = run("jobs", "submit", str(manifest), "--team", "research", "--config", str(governed),
                       clients=aws_clients(fake.url))
    assert code == 1
    assert "already exists: delete it first (hpctl jobs delete train --namespace hyperpod-ns-research)" in err


def test_submit_dry_run_sends_nothing_and_refuses_other_kinds(run, governed, tmp_path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(pytorch_job("train", "training", [])))
    code, data = run.json("jobs", "submit", str(manifest), "--team", "research", "--dry-run", "--config", str(governed))
    assert code == 0 and data["objects"][0]["namespace"] == TEAM_NS
    manifest.write_text(yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}))
    code, _, err = run("jobs", "submit", str(manifest), "--config", str(governed))
    assert code == 2 and "not Deployment (kubectl apply the rest)" in err


# --- monitoring ----------------------------------------------------------------------------------------------------


def test_monitoring_reads_the_observability_stack_outputs(run, write_config) -> None:
    data = config_data()
    data["observability"] = {"prometheus": {"enabled": True}, "grafana": {"enabled": True}, "dashboard": True}
    config = write_config(data)
    cfn, stub = stubbed("cloudformation")
    endpoint = f"https://aps-workspaces.{REGION}.amazonaws.com/workspaces/ws-0123/api/v1/"
    stub.add_response("describe_stacks", {"Stacks": [{
        "StackName": "hp-observability", "CreationTime": "2026-12-01T00:00:00Z", "StackStatus": "CREATE_COMPLETE",
        "Outputs": [
            {"OutputKey": "ObservabilityGrafanaUrl5B4E8B4F", "OutputValue": "https://g-1.grafana-workspace.x"},
            {"OutputKey": "ObservabilityPrometheusEndpoint26375811", "OutputValue": endpoint},
            {"OutputKey": "ObservabilityDashboardUrlA138D77D", "OutputValue": "https://console/dash"},
        ]}]}, {"StackName": "hp-observability"})
    code, out = run.json("monitoring", "--config", str(config), clients={"cloudformation": cfn})
    assert code == 0
    assert out["grafana_url"] == "https://g-1.grafana-workspace.x"
    assert out["prometheus_query_url"] == endpoint + "query"
    assert out["dashboard_url"] == "https://console/dash" and out["alerts_topic_arn"] is None


def test_the_token_is_the_one_the_kubeconfig_of_hpctl_kubeconfig_gets_from_aws_eks_get_token(
        run, governed, fake, tmp_path, monkeypatch) -> None:
    """The entry `hpctl kubeconfig` writes runs `aws eks get-token` (an exec credential plugin); the client runs it
    the same way kubectl does and sends its token. A stand-in `aws` prints an ExecCredential
    (client.authentication.k8s.io/v1beta1: status.token, status.expirationTimestamp)."""
    from hpctl.kubeconfig import build_entry

    entry = build_entry({"arn": EKS_ARN, "name": EKS_NAME, "endpoint": fake.url}, REGION)
    path = tmp_path / "kube" / "config"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(entry), encoding="utf-8")
    monkeypatch.setenv("KUBECONFIG", str(path))
    bin_dir, calls = tmp_path / "bin", tmp_path / "aws-calls"
    bin_dir.mkdir()
    credential = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": "k8s-aws-v1.from-get-token", "expirationTimestamp": "2099-01-01T00:00:00Z"}}
    aws = bin_dir / "aws"
    aws.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\ncat <<'JSON'\n{json.dumps(credential)}\nJSON\n")
    aws.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    fake.on("GET", f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs", listing("PyTorchJob", []))
    fake.on("GET", f"/apis/kubeflow.org/v2beta1/namespaces/{TEAM_NS}/mpijobs", listing("MPIJob", []))
    code, data = run.json("jobs", "list", "--team", "research", "--config", str(governed),
                          clients=aws_clients(fake.url))
    assert code == 0 and data == []
    assert calls.read_text().split() == ["--region", REGION, "eks", "get-token", "--cluster-name", EKS_NAME,
                                         "--output", "json"]
    assert {r["authorization"] for r in fake.requests} == {"Bearer k8s-aws-v1.from-get-token"}


def test_submitting_rendered_s3_volumes_for_a_team_binds_a_volume_of_its_own(run, governed, tmp_path) -> None:
    """s3-volumes.yaml rendered for the examples' namespace, submitted for a team: the claim moves, and its volume
    is renamed and bound to it there (a volume binds one claim)."""
    files = examples.render(parse_config(governed_config(s3_csi=S3_BUCKET), "t"))
    manifest = tmp_path / "s3.yaml"
    pv, pvc = (d for d in yaml.safe_load_all(files["s3-volumes.yaml"]) if d)
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "training"},
           "spec": {}}
    manifest.write_text(yaml.safe_dump_all([pv, pvc, job]))
    code, data = run.json("jobs", "submit", str(manifest), "--team", "research", "--dry-run", "--config", str(governed))
    assert code == 0
    placed_pv, placed_pvc, _ = data["manifests"]
    assert placed_pv["metadata"]["name"] == f"{TEAM_NS}-s3-ckpt"
    assert placed_pv["spec"]["claimRef"] == {"namespace": TEAM_NS, "name": "s3-ckpt"}
    assert placed_pvc["metadata"]["namespace"] == TEAM_NS
    assert placed_pvc["spec"]["volumeName"] == f"{TEAM_NS}-s3-ckpt"


def test_with_fsx_only_a_team_job_is_left_out_since_the_claim_is_elsewhere() -> None:
    from hpctl import teams

    data = governed_config()
    data["storage"] = {"fsx_lustre": {"enabled": True}}
    config = parse_config(data, "t")
    where = teams.placement(config, "research", None)
    assert examples.training_refusal(config) is None  # the examples' namespace has the FSx claim
    reason = examples.training_refusal(config, where)
    assert reason is not None and f"the FSx claim is in namespace training, not {TEAM_NS}" in reason
    assert examples.TRAINING_FILE not in examples.render(config, where=where)


def test_monitoring_without_the_stack_is_one_line_and_exit_3(run, config_file) -> None:
    cfn, stub = stubbed("cloudformation")
    stub.add_client_error("describe_stacks", "ValidationError", "Stack with id hp-observability does not exist",
                          expected_params={"StackName": "hp-observability"})
    code, out, err = run("monitoring", "--config", str(config_file), clients={"cloudformation": cfn})
    assert (code, out) == (3, "")
    assert err == "hpctl: stack hp-observability not found in us-west-2: deploy the app with observability on first\n"


def test_list_looks_in_the_examples_and_every_team_namespace_for_the_kinds_the_cluster_has(
        run, governed, fake, kubeconfig) -> None:
    code, data = run.json("jobs", "list", "--config", str(governed), clients=aws_clients(fake.url))
    assert code == 0 and data == []
    # No HyperPodPyTorchJob without addons.training_operator; a kind whose CRD is missing (404) lists nothing.
    assert [r["path"] for r in fake.sent("GET")] == [
        "/apis/kubeflow.org/v1/namespaces/training/pytorchjobs",
        f"/apis/kubeflow.org/v1/namespaces/{TEAM_NS}/pytorchjobs",
        "/apis/kubeflow.org/v2beta1/namespaces/training/mpijobs",
        f"/apis/kubeflow.org/v2beta1/namespaces/{TEAM_NS}/mpijobs",
    ]


def test_the_pod_of_a_rank_for_a_hyperpod_job_and_an_mpi_job() -> None:
    from hpctl import jobs
    from hpctl.errors import UsageError

    hp_job = {"kind": "HyperPodPyTorchJob", "metadata": {"name": "hp", "namespace": "training"}}
    hp_pods = [pod(f"hp-pod-{i}", "training", {"HPJob": "hp"}, None) for i in (1, 0, 10)]
    assert jobs.rank_pod(jobs.HYPERPOD, hp_job, hp_pods, None)["metadata"]["name"] == "hp-pod-0"
    assert jobs.rank_pod(jobs.HYPERPOD, hp_job, hp_pods, 10)["metadata"]["name"] == "hp-pod-10"
    mpi_job = {"kind": "MPIJob", "metadata": {"name": "nccl", "namespace": "training"}}
    role = "training.kubeflow.org/job-role"
    mpi_pods = [pod("nccl-worker-0", "training", {role: "worker"}, None),
                pod("nccl-launcher-x1", "training", {role: "launcher"}, None)]
    assert jobs.rank_pod(jobs.MPI, mpi_job, mpi_pods, None)["metadata"]["name"] == "nccl-launcher-x1"
    with pytest.raises(UsageError, match="leave out --rank"):
        jobs.rank_pod(jobs.MPI, mpi_job, mpi_pods, 1)
