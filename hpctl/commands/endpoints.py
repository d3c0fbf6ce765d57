"""For data scientists: `hpctl endpoints` lists, describes, invokes and deletes the inference operator's endpoints
(hpctl/endpoints.py), with the Kubernetes client and conventions of `hpctl jobs`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hpctl import endpoints
from hpctl.commands.jobs import _add_lookup as add_lookup
from hpctl.commands.jobs import _connect, _k8s_events, _place, _where, confirm_and_delete
from hpctl.commands.options import add_command, add_yes
from hpctl.errors import EXIT_CODE_TABLE, EXIT_OK, UsageError
from hpctl.output import fields, print_json, print_table, table
from hpctl.target import Target


def _needs_operator(t: Target) -> None:
    if not t.cfg.addons.inference_operator.enabled:
        raise UsageError("addons.inference_operator is off in the config: the cluster serves no JumpStartModel or "
                         "InferenceEndpointConfig")


def cmd_list(args: argparse.Namespace, t: Target, clients: Any) -> int:
    _needs_operator(t)
    where = _where(args, t)
    records = endpoints.list_records(_connect(args, t, clients), where)
    if args.json:
        print_json(records)
        return EXIT_OK
    print_table(["NAME", "KIND", "TEAM/NAMESPACE", "MODEL", "INSTANCE TYPE", "STATE", "SAGEMAKER ENDPOINT", "AGE"],
                [[r["name"], r["kind"], _place(r), r["model"], r["instance_type"], r["state"],
                  f"{r['sagemaker_endpoint']} ({r['sagemaker_state']})" if r["sagemaker_state"]
                  else r["sagemaker_endpoint"], r["age"]] for r in records])
    print(f"{len(records)} endpoint(s) in {', '.join(where) if where else 'every namespace'}", file=sys.stderr)
    return EXIT_OK


def cmd_describe(args: argparse.Namespace, t: Target, clients: Any) -> int:
    _needs_operator(t)
    cluster = _connect(args, t, clients)
    _, obj = endpoints.find(cluster, args.name, _where(args, t), args.kind)
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    record = endpoints.record(obj)
    status = obj.get("status") or {}
    conditions = [{k: c.get(k) for k in ("type", "status", "reason", "message", "lastTransitionTime")}
                  for c in status.get("conditions") or []]
    selector = status.get("selector")
    pods = cluster.pods(ns, selector) if selector else []
    pod_rows = [{"pod": p["metadata"]["name"], "node": (p.get("spec") or {}).get("nodeName"),
                 "phase": (p.get("status") or {}).get("phase")} for p in pods]
    events = _k8s_events(cluster, ns, {name, *(p["pod"] for p in pod_rows)})
    sagemaker = None
    if record["sagemaker_endpoint"]:
        described = endpoints.describe_sagemaker_endpoint(clients("sagemaker"), record["sagemaker_endpoint"])
        sagemaker = None if described is None else {
            "status": described.get("EndpointStatus"), "arn": described.get("EndpointArn"),
            "failure_reason": described.get("FailureReason")}
    deployment = status.get("deploymentStatus") or {}
    if args.json:
        print_json({**record, "conditions": conditions, "deployment": deployment.get("name"),
                    "deployment_state": deployment.get("deploymentObjectOverallState"), "pods": pod_rows,
                    "events": events, "sagemaker": sagemaker})
        return EXIT_OK
    print(fields([("Name", name), ("Kind", record["kind"]), ("Namespace", ns), ("Team", record["team"]),
                  ("Model", record["model"]), ("Instance type", record["instance_type"]), ("State", record["state"]),
                  ("Deployment", deployment.get("name")),
                  ("Deployment state", deployment.get("deploymentObjectOverallState")),
                  ("SageMaker endpoint", record["sagemaker_endpoint"]),
                  ("SageMaker status", (sagemaker or {}).get("status") or ("not registered yet"
                                                                          if record["sagemaker_endpoint"] else None)),
                  ("Failure reason", (sagemaker or {}).get("failure_reason")), ("Created", record["created"])]))
    for title, headers, rows in (
        ("conditions", ["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"],
         [[c["type"], c["status"], c["reason"], c["lastTransitionTime"], c["message"]] for c in conditions]),
        ("pods", ["POD", "NODE", "PHASE"], [[p["pod"], p["node"], p["phase"]] for p in pod_rows]),
        ("events", ["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"],
         [[e["time"], e["type"], e["reason"], e["object"], e["message"]] for e in events]),
    ):
        print(f"\n{title}:")
        print(table(headers, rows) if rows else "  none")
    return EXIT_OK


def cmd_invoke(args: argparse.Namespace, t: Target, clients: Any) -> int:
    _needs_operator(t)
    data = endpoints.payload(args.body, args.content_type)  # a bad body is refused before any call
    _, obj = endpoints.find(_connect(args, t, clients), args.name, _where(args, t), args.kind)
    endpoint = endpoints.ready_endpoint(obj, clients("sagemaker"))
    content_type, answer = endpoints.invoke(clients("sagemaker-runtime"), endpoint, data, args.content_type)
    if args.json:
        text = answer.decode("utf-8", errors="replace")
        print_json({"endpoint": endpoint, "content_type": content_type, "body": text})
        return EXIT_OK
    sys.stdout.write(answer.decode("utf-8", errors="replace"))
    if not answer.endswith(b"\n"):
        sys.stdout.write("\n")
    return EXIT_OK


def cmd_delete(args: argparse.Namespace, t: Target, clients: Any) -> int:
    _needs_operator(t)
    cluster = _connect(args, t, clients)
    kind, obj = endpoints.find(cluster, args.name, _where(args, t), args.kind)
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    registered = endpoints.sagemaker_endpoint_name(obj)
    question = (f"Delete {kind.kind} {ns}/{name} ({endpoints.record(obj)['state']}) from cluster {t.cluster}? Its pods "
                "stop" + (f" and the operator removes SageMaker endpoint {registered}" if registered else "") +
                "; the model's weights stay where they are.")
    return confirm_and_delete(args, cluster, kind, ns, name, question)


def _add_lookup(p: argparse.ArgumentParser, *, name: bool = True) -> None:
    add_lookup(p, name=name, metavar="ENDPOINT", what="the JumpStartModel's or InferenceEndpointConfig's name",
               kinds=endpoints.KINDS)


def register(sub: Any) -> None:
    group = sub.add_parser(
        "endpoints",
        help="list, describe, invoke and delete the inference operator's endpoints (JumpStartModel, "
             "InferenceEndpointConfig) with the EKS token of your kubeconfig",
        description="The HyperPod inference operator's endpoints on the EKS cluster, through the Kubernetes API and "
                    "your kubeconfig's context (checked against the HyperPod cluster's EKS endpoint), and the "
                    "SageMaker endpoint each registers. Without --namespace/--team/-A a command looks in the "
                    "examples' namespace and every team's. Deploy one with kubectl apply -f (render-examples writes "
                    "jumpstart-model.yaml and inference-endpoint.yaml).",
        epilog="example:\n  hpctl endpoints list\n"
               "  hpctl endpoints invoke tinyllama-gpu-workers \\\n"
               "    --body '{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}'\n\n"
               f"see hpctl endpoints ENDPOINTS_COMMAND --help\n\n{EXIT_CODE_TABLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = group.add_subparsers(dest="endpoints_command", metavar="ENDPOINTS_COMMAND", required=True)
    p = add_command(commands, "list", cmd_list,
                    "the endpoints: name, kind, team or namespace, model, instance type, state, SageMaker endpoint, "
                    "age", "hpctl endpoints list --team research --json", need_config=True)
    _add_lookup(p, name=False)
    p = add_command(commands, "describe", cmd_describe,
                    "one endpoint: its state, conditions, pods, Kubernetes events and its SageMaker endpoint's status",
                    "hpctl endpoints describe tinyllama-gpu-workers", need_config=True)
    _add_lookup(p)
    p = add_command(commands, "invoke", cmd_invoke,
                    "send one request to an endpoint through the SageMaker endpoint it registers (InvokeEndpoint), "
                    "once that is InService; print the answer",
                    "hpctl endpoints invoke tinyllama-gpu-workers --body @request.json", need_config=True)
    _add_lookup(p)
    p.add_argument("--body", required=True, metavar="BODY",
                   help="the request: the text itself, or @PATH for a file's bytes; JSON when --content-type is JSON")
    p.add_argument("--content-type", default=endpoints.JSON_CONTENT_TYPE, metavar="TYPE",
                   help=f"the request's content type (default {endpoints.JSON_CONTENT_TYPE})")
    p = add_command(commands, "delete", cmd_delete,
                    "delete an endpoint after a confirmation (the operator then removes its pods and SageMaker "
                    "endpoint)", "hpctl endpoints delete tinyllama-gpu-workers --team research", need_config=True)
    _add_lookup(p)
    add_yes(p)
