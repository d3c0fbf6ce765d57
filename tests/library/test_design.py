"""docs/design.md is true: the module that builds each resource, and what the optional stacks import."""

from __future__ import annotations

import inspect
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import CfnResource, Stack

from infra.guards.replacement import imported_exports
from tests.conftest import ROOT, Synthesized

DESIGN = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
VARIANTS = ["default_synth", "variant_synth", "fsx_synth", "byo_synth", "group_features_synth",
            "governance_synth", "addons_synth", "autoscaling_synth",
            "all_features_synth", "destroy_data_synth"]


def _table(heading_text: str) -> dict[str, set[str]]:
    """First column (a path or construct name in backticks) -> the resource types listed in the last column."""
    section = DESIGN.split(heading_text, 1)[1]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].startswith("---"):
            continue
        rows[re.findall(r"`([^`]+)`", cells[0])[0]] = set(re.findall(r"`((?:AWS|Custom)::[^`]+)`", cells[-1]))
    return rows


MODULES = _table("| module | resource types it builds |")
SINGLETONS = _table("| stack-level construct | asked for by | resource types |")


def _module_file(construct: object) -> str:
    """The repository path of the module that defines ``construct``'s class."""
    return Path(inspect.getsourcefile(type(construct))).resolve().relative_to(ROOT).as_posix()


def _is_ours(construct: object) -> bool:
    return type(construct).__module__.startswith(("infra.", "stacks.")) and not isinstance(construct, Stack)


_BUILT: dict[Path, tuple[dict[str, set[str]], dict[str, set[str]]]] = {}  # by synth output directory


def _built(synth: Synthesized) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The resource types each module of this library builds in ``synth``, and those each stack singleton adds."""
    if synth.outdir not in _BUILT:
        _BUILT[synth.outdir] = _walk(synth)
    return _BUILT[synth.outdir]


def _typed_paths(tree: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(construct path, resource type) of every node of the synthesized tree.json that records a type: aws-cdk-lib
    writes each construct's inspect() attributes there (core/lib/private/tree-metadata.js), and every generated
    L1 class reports its type as `aws:cdk:cloudformation:type`. A bare CfnResource (a custom resource's) has no
    inspect() and so no type there."""
    attributes = tree.get("attributes") or {}
    if "aws:cdk:cloudformation:type" in attributes:
        yield tree["path"], attributes["aws:cdk:cloudformation:type"]
    for child in (tree.get("children") or {}).values():
        yield from _typed_paths(child)


def _walk(synth: Synthesized) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    # Each path or type asked of a construct is a call into the CDK's JavaScript process (about 1 ms each), so
    # paths and types come from tree.json where it has them; the constructs of ours and the bare CfnResources are
    # asked. A resource's nearest construct of ours is its longest path prefix among them.
    assert not list(synth.outdir.glob("trees-*.json")), "tree.json is split across files; read them all"
    tree = json.loads((synth.outdir / "tree.json").read_text(encoding="utf-8"))["tree"]
    resources = dict(_typed_paths(tree))
    ours: dict[str, str] = {}
    for stack in synth.app.stacks:
        for construct in stack.node.find_all():
            if _is_ours(construct):
                ours[construct.node.path] = _module_file(construct)
            elif type(construct) is CfnResource:
                resources[construct.node.path] = construct.cfn_resource_type
    # Every resource of the templates was found, and nothing else: the same number of each type.
    in_templates = Counter(r["Type"] for t in synth.templates.values() for r in t["Resources"].values())
    assert Counter(resources.values()) == in_templates

    by_module: dict[str, set[str]] = defaultdict(set)
    by_singleton: dict[str, set[str]] = defaultdict(set)
    for path, cfn_type in resources.items():
        parts = path.split("/")
        enclosing = ("/".join(parts[:end]) for end in range(len(parts), 1, -1))  # itself, then up to the stack
        module = next((ours[prefix] for prefix in enclosing if prefix in ours), None)
        if module is not None:
            by_module[module].add(cfn_type)
        else:
            top = parts[1]  # the construct directly under the stack
            key = next((k for k in SINGLETONS if top.startswith(k.rstrip("…"))), top)
            by_singleton[key].add(cfn_type)
    return by_module, by_singleton


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_module_builds_only_what_its_row_lists(request, variant):
    by_module, by_singleton = _built(request.getfixturevalue(variant))
    assert {m: sorted(t - MODULES.get(m, set())) for m, t in by_module.items() if t - MODULES.get(m, set())} == {}
    assert {k: sorted(t - SINGLETONS.get(k, set())) for k, t in by_singleton.items()
            if t - SINGLETONS.get(k, set())} == {}


def test_each_row_lists_exactly_the_types_its_module_builds(all_features_synth, fsx_synth, destroy_data_synth):
    """Every optional feature is on in all-features.yaml; the FSx variant adds the S3 data repository link
    (all-features keeps the file system's backups, which FSx does not allow on a linked one), and the
    destroy-data variant the buckets' auto-delete provider (all-features keeps its data)."""
    by_module: dict[str, set[str]] = defaultdict(set)
    by_singleton: dict[str, set[str]] = defaultdict(set)
    for synth in (all_features_synth, fsx_synth, destroy_data_synth):
        modules, singletons = _built(synth)
        for name, types in modules.items():
            by_module[name] |= types
        for name, types in singletons.items():
            by_singleton[name] |= types
    assert {m: sorted(t) for m, t in by_module.items()} == {m: sorted(t) for m, t in MODULES.items()}
    for module in MODULES:
        assert (ROOT / module).is_file(), module
    assert {k: sorted(v) for k, v in by_singleton.items()} == {k: sorted(v) for k, v in SINGLETONS.items()}
    section = DESIGN.split("| stack-level construct |", 1)[1].split("\n\n", 1)[0]  # that table only
    for requester in re.findall(r"\| `(infra/[^`]+)` \|", section):
        assert (ROOT / requester).is_file(), requester


@pytest.mark.parametrize("variant", VARIANTS)
def test_optional_stacks_import_only_what_the_hyperpod_stack_imports(request, variant):
    """So their exports exist whether observability and storage are on or off."""
    synth = request.getfixturevalue(variant)

    def imports(part: str) -> set[str]:
        return imported_exports(synth.template(part)["Resources"])

    optional = [p for p in ("observability", "storage") if f"{synth.config.project}-{p}" in synth.templates]
    assert optional
    for part in optional:
        assert imports(part) <= imports("hyperpod"), part
