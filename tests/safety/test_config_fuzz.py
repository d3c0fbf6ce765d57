"""Property: any mutation of a valid config either loads or raises ConfigError with a one-line message.

Mutations: drop a key, rename a key, add an unknown key, replace a value (anywhere, at any depth) with a
random string, int, float, bool, None, list or mapping. Derandomized (fixed seed) for stable CI runs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.config import AppConfig, load_config, parse_config
from infra.errors import ConfigError
from tests.conftest import default_config_data

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
