"""For data scientists: `hpctl jobs` submits, lists, describes, follows and deletes the jobs (hpctl/jobs.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from hpctl import cluster as api
from hpctl import jobs, kube, teams
from hpctl.commands.examples import add_team_options
from hpctl.commands.options import add_command, add_yes, bounded
from hpctl.commands.terminal import confirm, err
from hpctl.commands.watch import EVENT_HEADERS, _event_record, _event_row
from hpctl.errors import EXIT_CODE_TABLE, EXIT_FAILED, EXIT_OK, UsageError
from hpctl.output import fields, print_json, print_table, table, to_json
from hpctl.target import Target

# What `submit` creates besides the jobs: what render-examples writes next to them (its inference Deployment and
# Service are not jobs: kubectl apply them).
OTHER_KINDS = ("Namespace", "ConfigMap", "PersistentVolume", "PersistentVolumeClaim")
# describe reads the HyperPod cluster events of at most this many of the job's nodes (one ListClusterEvents each).
MAX_FAULT_NODES = 10
FAULT_LEVELS = ("Warn", "Error")


def _connect(args: argparse.Namespace, t: Target, clients: Any) -> jobs.Cluster:
    desc = api.describe_cluster(clients("sagemaker"), t.cluster)
    return jobs.Cluster(kube.connect(args.kube_context, desc, clients))


def _where(args: argparse.Namespace, t: Target) -> list[str] | None:
    return jobs.namespaces(t.cfg, args.namespace, args.team, args.all_namespaces)


def _place(record: dict[str, Any]) -> str:
    return f"{record['team']} (team)" if record["team"] else record["namespace"]


def cmd_list(args: argparse.Namespace, t: Target, clients: Any) -> int:
    where = _where(args, t)
    records = jobs.list_records(_connect(args, t, clients), t.cfg, where)
    if args.json:
        print_json(records)
        return EXIT_OK
    print_table(["NAME", "KIND", "TEAM/NAMESPACE", "STATUS", "RESTARTS", "AGE", "NODES"],
                [[r["name"], r["kind"], _place(r), r["status"], r["restarts"], r["age"], r["nodes"]] for r in records])
    print(f"{len(records)} job(s) in {', '.join(where) if where else 'every namespace'}", file=sys.stderr)
    return EXIT_OK


def _event_time(event: dict[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or "")


def _k8s_events(cluster: jobs.Cluster, ns: str, names: set[str]) -> list[dict[str, Any]]:
    """The events of the job and of its pods, oldest first (core/v1 Event: involvedObject, type, reason)."""
    picked = [e for e in cluster.events(ns) if (e.get("involvedObject") or {}).get("name") in names]
    return [{"time": _event_time(e), "type": e.get("type"), "reason": e.get("reason"),
             "object": f"{(e.get('involvedObject') or {}).get('kind')}/{(e.get('involvedObject') or {}).get('name')}",
             "count": e.get("count"), "message": e.get("message")}
            for e in sorted(picked, key=_event_time)]


def _node_faults(sm: Any, t: Target, job: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The HyperPod cluster events at Warn or Error of the job's nodes (and of the instances HyperPod blamed for
    its latest restart) since the job was created: what `hpctl events --node` shows."""
    instances = [api.normalize_node_id(p["spec"]["nodeName"]) for p in pods if (p.get("spec") or {}).get("nodeName")]
    instances = list(dict.fromkeys([*jobs.faulty_instances(job), *instances]))[:MAX_FAULT_NODES]
    after = jobs._parse_time(job["metadata"].get("creationTimestamp"))
    faults = [_event_record(e) for node in instances for e in api.iter_events(sm, t.cluster, after=after, node=node)
              if e.get("EventLevel") in FAULT_LEVELS]
    return sorted(faults, key=lambda r: str(r["time"]))


def cmd_describe(args: argparse.Namespace, t: Target, clients: Any) -> int:
    cluster = _connect(args, t, clients)
    kind, job = jobs.find(cluster, t.cfg, args.name, _where(args, t), args.kind)
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    pods = jobs.pods_of(kind, job, cluster.pods(ns, f"{kind.pod_label}={name}"))
    record = jobs.record(job, pods)
    conditions = [{k: c.get(k) for k in ("type", "status", "reason", "message", "lastTransitionTime")}
                  for c in (job.get("status") or {}).get("conditions") or []]
    pod_rows = [{"pod": p["metadata"]["name"], "node": (p.get("spec") or {}).get("nodeName"),
                 "phase": (p.get("status") or {}).get("phase"),
                 "container_restarts": sum(int(c.get("restartCount") or 0)
                                           for c in (p.get("status") or {}).get("containerStatuses") or [])}
                for p in pods]
    events = _k8s_events(cluster, ns, {name, *(p["pod"] for p in pod_rows)})
    faults = _node_faults(clients("sagemaker"), t, job, pods)
    if args.json:
        print_json({**record, "conditions": conditions, "faulty_instances": jobs.faulty_instances(job),
                    "pods": pod_rows, "events": events, "node_faults": faults})
        return EXIT_OK
    print(fields([("Name", name), ("Kind", record["kind"]), ("Namespace", ns), ("Team", record["team"]),
                  ("Queue", record["queue"]), ("Priority class", record["priority_class"]),
                  ("Status", record["status"]), ("Restarts", record["restarts"]), ("Created", record["created"]),
                  ("Nodes", record["nodes"]), ("Faulty instances", jobs.faulty_instances(job))]))
    for title, headers, rows in (
        ("conditions", ["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"],
         [[c["type"], c["status"], c["reason"], c["lastTransitionTime"], c["message"]] for c in conditions]),
        ("pods", ["POD", "NODE", "PHASE", "RESTARTS"],
         [[p["pod"], p["node"], p["phase"], p["container_restarts"]] for p in pod_rows]),
        ("events", ["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"],
         [[e["time"], e["type"], e["reason"], e["object"], e["message"]] for e in events]),
        ("node faults (HyperPod cluster events at Warn or Error of its nodes since it was created)", EVENT_HEADERS,
         [_event_row(f) for f in faults]),
    ):
        print(f"\n{title}:")
        print(table(headers, rows) if rows else "  none")
    return EXIT_OK


def cmd_logs(args: argparse.Namespace, t: Target, clients: Any) -> int:
    cluster = _connect(args, t, clients)
    kind, job = jobs.find(cluster, t.cfg, args.name, _where(args, t), args.kind)
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    pod = jobs.rank_pod(kind, job, cluster.pods(ns, f"{kind.pod_label}={name}"), args.rank)
    pod_name = pod["metadata"]["name"]
    err(f"{'following' if args.follow else 'log of'} {ns}/{pod_name} (rank {args.rank or 0} of {kind.kind} {name})")
    pending = b""
    try:
        for chunk in cluster.log_stream(pod, args.follow, args.tail):
            if not args.json:
                sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                sys.stdout.flush()
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                print(to_json({"pod": pod_name, "line": line.decode("utf-8", errors="replace")}, indent=None),
                      flush=True)
    except (OSError, ValueError):
        raise
    except Exception as error:  # the stream broke (urllib3's ProtocolError, a timeout)
        raise kube.api_error(error, f"reading the log of {ns}/{pod_name}") from None
    if args.json and pending:
        print(to_json({"pod": pod_name, "line": pending.decode("utf-8", errors="replace")}, indent=None))
    return EXIT_OK


def cmd_delete(args: argparse.Namespace, t: Target, clients: Any) -> int:
    cluster = _connect(args, t, clients)
    kind, job = jobs.find(cluster, t.cfg, args.name, _where(args, t), args.kind)
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    question = (f"Delete {kind.kind} {ns}/{name} ({jobs.job_status(job)}) from cluster {t.cluster}? Its pods stop; "
                "what it wrote to a shared volume stays.")
    return confirm_and_delete(args, cluster, kind, ns, name, question)


def confirm_and_delete(args: argparse.Namespace, cluster: jobs.Cluster, kind: jobs.JobKind, ns: str, name: str,
                       question: str) -> int:
    """Ask ``question`` (or take --yes), then delete the custom object: what `jobs delete` and `endpoints delete`
    do once they found it."""
    if not confirm(question, args.yes):
        err("aborted, nothing deleted")
        return EXIT_FAILED
    cluster.delete_job(kind, ns, name)
    if args.json:
        print_json({"deleted": {"kind": kind.kind, "namespace": ns, "name": name}})
    else:
        print(f"deleted {kind.kind} {ns}/{name}")
    return EXIT_OK


def _documents(path: str) -> list[dict[str, Any]]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        raise UsageError(f"{path} is not YAML: {' '.join(str(error).split())}") from None
    allowed = (*sorted(jobs.KINDS), *OTHER_KINDS)
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") not in allowed:
            what = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
            raise UsageError(f"{path}: jobs submit takes {', '.join(allowed)}, not {what} (kubectl apply the rest)")
        if not (doc.get("metadata") or {}).get("name"):
            raise UsageError(f"{path}: a {doc['kind']} without metadata.name")
    if not any(d["kind"] in jobs.KINDS for d in docs):
        raise UsageError(f"{path} has no job ({', '.join(sorted(jobs.KINDS))}): render one with hpctl render-examples")
    return docs


def cmd_submit(args: argparse.Namespace, t: Target, clients: Any) -> int:
    where = teams.placement(t.cfg, args.team, args.priority)
    docs = _documents(args.file)
    available = {k.kind for k in jobs.available_kinds(t.cfg)}
    for doc in docs:
        if doc["kind"] in jobs.KINDS and doc["kind"] not in available:
            raise UsageError(f"{doc['kind']} {doc['metadata']['name']} needs addons.training_operator, which is off "
                             "in the config")
    if where is not None:  # the team's namespace exists: task governance made it
        docs = [teams.apply(d, where) for d in docs if d["kind"] != "Namespace"]
    elif t.cfg.addons.task_governance.enabled:
        err("addons.task_governance is on: without --team the job is in no team's queue")
    for doc in docs:
        if doc["kind"] not in ("Namespace", "PersistentVolume") and not doc["metadata"].get("namespace"):
            raise UsageError(f"{doc['kind']} {doc['metadata']['name']} has no metadata.namespace: pass --team, or "
                             "set it in the file")
    rows = [{"kind": d["kind"], "namespace": d["metadata"].get("namespace"), "name": d["metadata"]["name"],
             "queue": (d["metadata"].get("labels") or {}).get(teams.QUEUE_LABEL),
             "priority_class": (d["metadata"].get("labels") or {}).get(teams.PRIORITY_CLASS_LABEL)} for d in docs]
    if args.dry_run:
        if args.json:
            print_json({"dry_run": True, "objects": rows, "manifests": docs})
        else:
            print("---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs), end="")
            err(f"dry run: would create {len(docs)} object(s), sent nothing")
        return EXIT_OK
    cluster = _connect(args, t, clients)
    for row, doc in zip(rows, docs, strict=True):
        row["result"] = cluster.create(doc)
    if args.json:
        print_json(rows)
    else:
        print_table(["KIND", "NAMESPACE", "NAME", "QUEUE", "RESULT"],
                    [[r["kind"], r["namespace"], r["name"], r["queue"], r["result"]] for r in rows])
    return EXIT_OK


def _add_kube_context(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kube-context", metavar="CONTEXT",
                   help="the kubeconfig context of the EKS cluster (default: the current context; write one with "
                        "hpctl kubeconfig)")


def _add_lookup(p: argparse.ArgumentParser, *, name: bool = True, metavar: str = "JOB",
                what: str = "the job's name", kinds: Any = jobs.KINDS) -> None:
    """The name, --kind and where-to-look options of the commands that find one object (jobs, endpoints)."""
    if name:
        p.add_argument("name", metavar=metavar, help=what)
        p.add_argument("--kind", choices=sorted(kinds), help="the kind, when a name is taken by several")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--namespace", "-n", metavar="NS", help="look in this namespace only")
    where.add_argument("--team", metavar="TEAM", help="look in this team's namespace (hyperpod-ns-TEAM) only")
    where.add_argument("--all-namespaces", "-A", action="store_true",
                       help="look in every namespace (needs cluster-wide read access)")
    _add_kube_context(p)


def register(sub: Any) -> None:
    group = sub.add_parser(
        "jobs",
        help="submit, list, describe, follow the logs of and delete training jobs (HyperPodPyTorchJob, PyTorchJob, "
             "MPIJob) with the EKS token of your kubeconfig",
        description="Jobs on the EKS cluster, through the Kubernetes API and your kubeconfig's context (checked "
                    "against the HyperPod cluster's EKS endpoint). Without --namespace/--team/-A a command looks in "
                    "the examples' namespace and every team's.",
        epilog="example:\n  hpctl jobs submit my-examples/pytorchjob-auto-resume.yaml --team research\n"
               "  hpctl jobs list\n  hpctl jobs logs train-auto-resume --follow\n\n"
               f"see hpctl jobs JOBS_COMMAND --help\n\n{EXIT_CODE_TABLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = group.add_subparsers(dest="jobs_command", metavar="JOBS_COMMAND", required=True)
    p = add_command(commands, "submit", cmd_submit,
                    "create the jobs of a manifest file (and its ConfigMaps, volumes, namespace), with --team in the "
                    "team's namespace and Kueue queue",
                    "hpctl jobs submit my-examples/pytorchjob-auto-resume.yaml --team research --priority training",
                    need_config=True)
    p.add_argument("file", metavar="FILE", help="a YAML file of manifests, e.g. one render-examples wrote; - for stdin")
    add_team_options(p, "submit the jobs")
    p.add_argument("--dry-run", action="store_true", help="print the manifests as they would be sent, send nothing")
    _add_kube_context(p)
    p = add_command(commands, "list", cmd_list,
                    "the jobs: name, kind, team or namespace, status, restarts (HyperPod's count), age and nodes",
                    "hpctl jobs list --team research --json", need_config=True)
    _add_lookup(p, name=False)
    p = add_command(commands, "describe", cmd_describe,
                    "one job: its conditions, pods, Kubernetes events, and the HyperPod cluster events of its nodes",
                    "hpctl jobs describe train-auto-resume --team research", need_config=True)
    _add_lookup(p)
    p = add_command(commands, "logs", cmd_logs, "the log of a job's rank 0 (or --rank N); --follow streams it",
                    "hpctl jobs logs train-auto-resume --follow\n"
                    "  hpctl jobs logs train-auto-resume --rank 1 --tail 100",
                    need_config=True)
    _add_lookup(p)
    p.add_argument("--rank", type=bounded(0), metavar="N",
                   help="the pod of node rank N (default 0: PyTorchJob Master, HyperPodPyTorchJob pod 0; an MPIJob's "
                        "launcher prints every rank)")
    p.add_argument("--follow", "-f", action="store_true", help="keep streaming until the pod ends or Ctrl-C")
    p.add_argument("--tail", type=bounded(0), metavar="LINES", help="only the last LINES lines")
    p = add_command(commands, "delete", cmd_delete, "delete a job after a confirmation",
                    "hpctl jobs delete train-auto-resume --team research", need_config=True)
    _add_lookup(p)
    add_yes(p)
