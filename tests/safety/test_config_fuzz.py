"""Property: any mutation of a valid config either loads or raises ConfigError with a one-line message.

Mutations: drop a key, rename a key, add an unknown key, replace a value (anywhere, at any depth) with a
random string, int, float, bool, None, list or mapping. Derandomized (fixed seed) for stable CI runs.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.config import AppConfig, load_config, parse_config
from infra.errors import ConfigError
from tests.conftest import ROOT, default_config_data

SETTINGS = settings(derandomize=True, database=None, deadline=1000, max_examples=150,
                    suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.sampled_from(["", "0.0.0.0/0", "10.0.0.0/8", "ml.p5.48xlarge", "usw2-az9", "1.99", "Automatic", "*"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=10), inner, max_size=3)), max_leaves=6)

Path_ = tuple[Any, ...]


def _paths(node: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every path to a value inside ``node`` (dict keys and list indexes)."""
    found: list[Path_] = []
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in children:
        found.append((*prefix, key))
        found.extend(_paths(child, (*prefix, key)))
    return found


def _parent(data: Any, path: Path_) -> Any:
    for key in path[:-1]:
        data = data[key]
    return data


@st.composite
def mutated_configs(draw: st.DrawFn) -> Any:
    data: Any = copy.deepcopy(default_config_data())
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = _paths(data)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(data, path)
        key = path[-1]
        action = draw(st.sampled_from(["drop", "rename", "add", "replace", "replace"]))
        if action == "drop":
            del parent[key]
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = parent.pop(key)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(values)
        else:
            parent[key] = draw(values)
    if draw(st.integers(min_value=0, max_value=20)) == 0:  # now and then the whole document is wrong
        data = draw(values)
    return data


def _check_outcome(data: Any) -> None:
    try:
        config = parse_config(data, "fuzz.yaml")
    except ConfigError as error:
        message = str(error)
        assert message.startswith("Invalid configuration") and "fuzz.yaml" in message, message
        assert "\n" not in message, message
        return
    assert isinstance(config, AppConfig)


@SETTINGS
@given(mutated_configs())
def test_mutated_config_loads_or_raises_one_line_config_error(data):
    _check_outcome(data)


def test_unmutated_default_loads():
    assert isinstance(parse_config(default_config_data(), "fuzz.yaml"), AppConfig)


@settings(derandomize=True, database=None, deadline=1000, max_examples=60)
@given(st.text(max_size=200))
def test_any_file_text_loads_or_raises_one_line_config_error(tmp_path_factory, text):
    path = Path(tmp_path_factory.mktemp("fuzz")) / "config.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_config(path)
    except ConfigError as error:
        assert "\n" not in str(error), str(error)


# --- Seeds: hostile inputs, each refused with one short line naming the key, within a second ------------

DEFAULT_TEXT = (ROOT / "config" / "default.yaml").read_text(encoding="utf-8")

FILE_SEEDS: list[tuple[str, bytes, str]] = [
    ("alias bomb", b'a: &a ["x", "x"]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nd: [*c, *c, *c, *c]\n',
     "line 2: YAML aliases (*a) are not supported"),
    ("recursive alias", b"a: &a [*a]\n", "line 1: YAML aliases (*a) are not supported"),
    ("5,000-deep flow nesting", b"x: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested deeper than 40 levels"),
    ("5,000-deep mapping nesting", b"x: " + b"{a: " * 5000 + b"}" * 5000 + b"\n", "nested deeper than 40 levels"),
    ("deep block nesting", "".join("  " * i + "k:\n" for i in range(500)).encode(), "nested deeper than 40 levels"),
    ("not UTF-8", DEFAULT_TEXT.replace("hyperpod-dev", "hyperpod-d\xe9v", 1).encode("latin-1"), "not UTF-8 text"),
    ("duplicate top-level key", (DEFAULT_TEXT + "region: us-east-1\n").encode(), "region: duplicate key"),
    ("duplicate nested key",
     DEFAULT_TEXT.replace("  cluster_name: hyperpod-dev\n", "  cluster_name: hyperpod-dev\n  cluster_name: x\n")
     .encode(),
     "cluster_name: duplicate key"),
    ("absurdly long string", DEFAULT_TEXT.replace("project: hyperpod-dev", "project: " + "x" * 200_000).encode(),
     "project: a string of 200000 characters"),
    ("bidirectional override", DEFAULT_TEXT.replace("project: hyperpod-dev", 'project: "hyper\u202epod"').encode(),
     "project: holds the control or bidirectional character U+202E"),
    ("control character", DEFAULT_TEXT.replace("project: hyperpod-dev", 'project: "hyper\\x07pod"').encode(),
     "project: holds the control or bidirectional character U+0007"),
    ("control character in a key", DEFAULT_TEXT.replace("tags: {}", 'tags: {"a\\x1bb": c}').encode(),
     "holds the control or bidirectional character U+001B"),
    ("oversized file", b"# " + b"x" * 2_000_000 + b"\n", "larger than 1000000 bytes"),
]

DATA_SEEDS: list[tuple[str, dict[str, Any], str]] = [
    ("true as a count", {"hyperpod": {"instance_groups": [{"instance_count": True}]}},
     "hyperpod.instance_groups.0.instance_count"),
    ("2.0 as a count", {"hyperpod": {"instance_groups": [{"ebs_volume_gb": 500.0}]}},
     "hyperpod.instance_groups.0.ebs_volume_gb"),
    ("true as threads per core", {"hyperpod": {"instance_groups": [{"threads_per_core": True}]}},
     "threads_per_core: expected a whole number"),
    ("true as retention", {"eks": {"log_retention_days": True}}, "eks.log_retention_days"),
    ("label key with a space", {"hyperpod": {"instance_groups": [{"labels": {"my team": "a"}}]}},
     "not a Kubernetes key"),
    ("label key with a bad prefix", {"hyperpod": {"instance_groups": [{"labels": {"Example.COM/team": "a"}}]}},
     "the prefix before '/' must be a DNS subdomain"),
    ("label value too long", {"hyperpod": {"instance_groups": [{"labels": {"team": "a" * 64}}]}},
     "not a Kubernetes label value"),
    ("taint key with a colon",
     {"hyperpod": {"instance_groups": [{"taints": [{"key": "a:b", "effect": "NoSchedule"}]}]}},
     "hyperpod.instance_groups.0.taints.0.key"),
    ("tag key with aws:", {"tags": {"aws:team": "x"}}, "the aws: prefix is reserved"),
    ("tag value longer than CloudFormation takes", {"tags": {"team": "x" * 257}}, "tags.team"),
    ("on_create_script longer than CloudFormation takes", {"hyperpod": {"on_create_script": "a" * 129 + ".sh"}},
     "hyperpod.on_create_script"),
    ("lifecycle scripts outside the project", {"hyperpod": {"lifecycle_scripts_dir": "../elsewhere"}},
     "hyperpod.lifecycle_scripts_dir: leads outside the project"),
    ("absolute lifecycle scripts dir", {"hyperpod": {"lifecycle_scripts_dir": "/etc"}},
     "hyperpod.lifecycle_scripts_dir: leads outside the project"),
    ("chart path with ..", {"hyperpod": {"dependencies_chart": {"chart_path": "helm_chart/../../x"}}},
     "hyperpod.dependencies_chart.chart_path: leads outside the project"),
    ("local chart outside the project",
     {"hyperpod": {"dependencies_chart": {"source": "local",
                                          "local_path": str(ROOT / "infra" / "constructs" / "storage_chart")}}},
     "hyperpod.dependencies_chart.local_path: leads outside the project"),
    ("OCI chart version range", {"hyperpod": {"dependencies_chart": {
        "source": "oci", "oci_uri": "oci://example.com/charts/hyperpod", "version": "^1.2.0"}}},
     "hyperpod.dependencies_chart.version"),
    ("OCI chart version latest", {"hyperpod": {"dependencies_chart": {
        "source": "oci", "oci_uri": "oci://example.com/charts/hyperpod", "version": "latest"}}},
     "hyperpod.dependencies_chart.version"),
    ("instance count above the API's range", {"hyperpod": {"instance_groups": [{"instance_count": 10**12}]}},
     "hyperpod.instance_groups.0.instance_count"),
]


def _merge_group(changes: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``changes`` into the default config; a one-element group list patches the first group."""
    data = copy.deepcopy(default_config_data())

    def merge(target: Any, patch: Any) -> None:
        for key, value in patch.items():
            if key == "instance_groups":
                target[key][0].update(value[0])
            elif isinstance(value, dict) and isinstance(target.get(key), dict):
                merge(target[key], value)
            else:
                target[key] = value

    merge(data, changes)
    return data


@pytest.fixture(scope="module", autouse=True)
def _warm_botocore() -> None:
    """Load botocore's models once, so the timings below measure the checks, not a cold cache."""
    parse_config(default_config_data(), "warm.yaml")


def _refused_quickly(load: Any, expected: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        load()
    elapsed = time.perf_counter() - start
    message = str(caught.value)
    assert expected in message, message
    assert "\n" not in message and len(message) < 700, message
    # A hang guard, not a speed target (those are measured by `make bench`): catastrophic backtracking in a
    # validator would take minutes on these inputs; a loaded CI machine takes well under a second.
    assert elapsed < 10.0, f"{elapsed:.2f} s"


@pytest.mark.parametrize(("name", "raw", "expected"), FILE_SEEDS, ids=[s[0] for s in FILE_SEEDS])
def test_hostile_file_is_refused_in_one_short_line(tmp_path, name, raw, expected):
    path = tmp_path / "config.yaml"
    path.write_bytes(raw)
    _refused_quickly(lambda: load_config(path), expected)


@pytest.mark.parametrize(("name", "changes", "expected"), DATA_SEEDS, ids=[s[0] for s in DATA_SEEDS])
def test_bad_value_is_refused_in_one_short_line(name, changes, expected):
    data = _merge_group(changes)
    _refused_quickly(lambda: parse_config(data, "seed.yaml"), expected)


def test_paths_outside_the_project_pass_when_the_user_opts_in():
    data = _merge_group({"hyperpod": {"allow_paths_outside_project": True,
                                      "dependencies_chart": {"chart_path": "../charts/hyperpod"}}})
    assert parse_config(data, "seed.yaml").hyperpod.dependencies_chart.chart_path == "../charts/hyperpod"


def test_exact_versions_and_valid_kubernetes_keys_pass():
    data = _merge_group({
        "tags": {"cost-center": "ml platform/2026"},
        "hyperpod": {
            "dependencies_chart": {"source": "oci", "oci_uri": "oci://example.com/charts/hyperpod",
                                   "version": "1.2.3-rc.1+build.5"},
            "instance_groups": [{"labels": {"example.com/team": "research_1", "tier": ""},
                                 "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}],
        },
    })
    config = parse_config(data, "seed.yaml")
    assert config.hyperpod.instance_groups[0].labels == {"example.com/team": "research_1", "tier": ""}


def test_default_file_still_loads():
    assert isinstance(load_config(ROOT / "config" / "default.yaml"), AppConfig)
