"""Imports point down: no module of infra/ or hpctl/ imports itself back through others, and the layers keep
to the rule of docs/design.md (constructs, facts and config never reach the guards; facts are leaves).

Read from the source with ``ast``, without importing anything: every ``import`` counts, the ones inside functions
and under ``if TYPE_CHECKING:`` included, since each is a dependency a reader has to follow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("infra", "hpctl")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """Every module of the packages: dotted name -> file."""
    return {_module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def _imported(module: str, path: Path, known: set[str]) -> Iterator[tuple[int, str]]:
    """(line, module) for each module of ``known`` that ``module`` imports anywhere in its file.

    ``from a.b import c`` imports ``a.b.c`` when that is a module, else ``a.b``; relative imports are resolved
    against the importing module's package.
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            # `import a.b.c` names a.b.c; keep the longest known prefix (a name may be an attribute of a module).
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                yield node.lineno, target


def import_graph() -> dict[str, dict[str, int]]:
    """Module -> {imported module: line of the first import of it}."""
    modules = _modules()
    known = set(modules)
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges: dict[str, int] = {}
        for line, target in _imported(module, path, known):
            edges.setdefault(target, line)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# (importing layer, layers it must not import, why)
FORBIDDEN = [
    ("infra.constructs", ("infra.guards",), "constructs never import the guards"),
    ("infra.facts", ("infra.guards",), "facts are leaves"),
    ("infra.config", ("infra.guards",), "the config never imports the guards"),
    ("infra.facts", ("infra.constructs", "infra.config"), "facts are leaves"),
    ("infra.config", ("infra.constructs", "infra.runtime"), "the config is below the constructs"),
    ("hpctl", ("infra.constructs", "infra.composition", "infra.hyperpod_on_eks", "stacks"),
     "hpctl never imports aws-cdk-lib's constructs"),
]

def layer_violations(graph: dict[str, dict[str, int]]) -> list[tuple[str, str, str]]:
    """(importer, imported, why) for every import that points against the layers."""
    found = []
    for module, edges in sorted(graph.items()):
        for layer, forbidden, why in FORBIDDEN:
            if _under(module, layer):
                found += [(module, target, f"{module}:{line} imports {target}: {why}")
                          for target, line in sorted(edges.items()) if any(_under(target, f) for f in forbidden)]
    return found


def test_the_walker_sees_imports_inside_functions_relative_imports_and_type_checking_blocks(tmp_path):
    """The graph reader itself: a cycle hidden in a function body or a TYPE_CHECKING block is still a cycle."""
    graph = import_graph()
    # infra/config/__init__.py imports its sections relatively or absolutely; either way they are edges.
    assert "infra.config.app" in graph["infra.config"]
    # hpctl/commands/kubeconfig.py imports the config inside a function.
    assert "infra.config" in graph["hpctl.commands.kubeconfig"]
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_module_of_infra_or_hpctl_is_part_of_an_import_cycle():
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_layers_import_only_downwards():
    assert [why for _, _, why in layer_violations(import_graph())] == []


def test_the_layer_check_catches_a_construct_that_imports_a_guard():
    graph = {"infra.constructs.x": {"infra.guards.y": 3}, "infra.facts.z": {"infra.config.w": 5},
             "infra.guards.y": {"infra.constructs.x": 1}}
    assert [why for _, _, why in layer_violations(graph)] == [
        "infra.constructs.x:3 imports infra.guards.y: constructs never import the guards",
        "infra.facts.z:5 imports infra.config.w: facts are leaves",
    ]

