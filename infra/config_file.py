"""Reading a config file safely: bytes -> UTF-8 text -> YAML document, refusing what would hang or mislead.

PyYAML's SafeLoader builds no objects but still expands aliases (a few lines can expand to billions of
nodes), recurses once per nesting level (5,000 levels end in RecursionError), and lets the last of two
equal keys win silently. PyYAML has no switch for any of these, so ``ConfigLoader`` refuses them itself:
a subclass of SafeLoader is a few lines, where another YAML library would be a new dependency.
Every refusal is a ``ConfigError`` naming the key (or the line) in one short line.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode

from infra.errors import ConfigError, credential_kind

# A config is a few kilobytes; these bounds are far above any real one and keep a bad file under a second.
MAX_FILE_BYTES = 1_000_000
MAX_DEPTH = 40
MAX_STRING = 8192
# Bidirectional formatting characters ("Trojan Source", CVE-2021-42574; the list of
# https://lintian.debian.org/tags/unicode-trojan): they make text read differently from what it is.
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Control characters a string value may hold (multi-line values such as scripts or chart values).
ALLOWED_CONTROLS = frozenset("\t\n")


# Plain scalars that YAML 1.1 (PyYAML's SafeLoader) and YAML 1.2's core schema read differently
# (https://yaml.org/spec/1.2.2/#1032-tag-resolution and https://yaml.org/type/int.html, /float.html, /bool.html):
# 010 is 8 in 1.1 and 10 in 1.2, 0b101, 1_000 and 1:30 (base 60) are numbers only in 1.1, yes/no/on/off are
# booleans only in 1.1. Either reading is a surprise to someone, so they are refused: quote the text or write
# the number in decimal. Kept by PyYAML's resolver: decimal integers, 0x hexadecimal and floats without "_" or ":",
# which both versions read alike, and true/false.
_SAME_IN_BOTH = {
    "tag:yaml.org,2002:int": re.compile(r"[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+"),
    "tag:yaml.org,2002:float": re.compile(r"[^_:]*"),
    "tag:yaml.org,2002:bool": re.compile(r"true|True|TRUE|false|False|FALSE"),
}


class YamlOneOne(str):
    """A plain scalar that YAML 1.1 and 1.2 read differently, kept as written until ``_check_strings`` refuses
    it with its key."""

    __slots__ = ()


class _Refused(yaml.YAMLError):
    def __init__(self, key: str, reason: str) -> None:
        super().__init__(reason)
        self.key = key
        self.reason = reason


class ConfigLoader(yaml.SafeLoader):
    """SafeLoader without aliases, duplicate keys or nesting deeper than MAX_DEPTH."""

    _depth = 0

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # The scanner itself slows down with every open bracket: stop before the composer would.
        if self.flow_level >= MAX_DEPTH:
            raise _Refused(f"line {self.line + 1}", f"nested deeper than {MAX_DEPTH} levels")
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
        where = f"line {event.start_mark.line + 1}"
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(where, f"YAML aliases (*{event.anchor}) are not supported; write the value out")
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(where, f"nested deeper than {MAX_DEPTH} levels")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        same = _SAME_IN_BOTH.get(node.tag)
        if same is not None and isinstance(node, ScalarNode) and node.style is None and not same.fullmatch(node.value):
            return YamlOneOne(node.value)
        return super().construct_object(node, deep=deep)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: SafeLoader reports it
                break
            if duplicate:
                raise _Refused(_shown(key), f"duplicate key (line {key_node.start_mark.line + 1}); "
                                            "the file must say each key once")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _shown(key: Any) -> str:
    text = str(key)
    return text if len(text) <= 60 and text.isprintable() else repr(text[:60])


def _check_strings(node: Any, path: str) -> None:
    """Refuse control and bidirectional characters in keys and values, absurdly long strings, YAML 1.1 forms
    and credentials."""
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{_shown(key)}" if path else _shown(key)
            if isinstance(key, str):
                _check_text(key, where, allowed=frozenset())
            _check_strings(value, where)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_strings(value, f"{path}.{i}")
    elif isinstance(node, str):
        _check_text(node, path or "<root>", allowed=ALLOWED_CONTROLS)


def _check_text(text: str, key: str, allowed: frozenset[str]) -> None:
    if isinstance(text, YamlOneOne):
        raise ConfigError(key, str(text), "YAML 1.1 and YAML 1.2 read this differently (a leading-zero, binary, "
                                          "base-60 or '_' number, or yes/no/on/off); quote it, or write the number "
                                          "in decimal and booleans as true/false")
    if (kind := credential_kind(text)) is not None:
        raise ConfigError(key, None, f"holds {kind}; a config is committed and its values reach the templates: "
                                     "pass secrets as docs/safety.md says (Secrets), not in the file")
    if len(text) > MAX_STRING:
        raise ConfigError(key, None, f"a string of {len(text)} characters; at most {MAX_STRING}")
    for char in text:
        if char in BIDI or (unicodedata.category(char) == "Cc" and char not in allowed):
            raise ConfigError(key, None, f"holds the control or bidirectional character U+{ord(char):04X}")


def read_config_document(path: Path) -> Any:
    """The YAML document in ``path``, refused with a ConfigError when it is not safe to read."""
    source = str(path)
    if not path.is_file():
        raise ConfigError("config", source, "no such file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ConfigError("config", source, f"larger than {MAX_FILE_BYTES} bytes; a config is a few kilobytes")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError("config", source, f"not UTF-8 text (byte 0x{raw[error.start]:02x} at offset "
                                            f"{error.start})") from None
    try:
        data = yaml.load(text, Loader=ConfigLoader)  # noqa: S506 - ConfigLoader is a SafeLoader
    except _Refused as error:
        raise ConfigError(error.key, None, error.reason, source=source) from None
    except (yaml.YAMLError, ConstructorError) as error:
        # PyYAML's message spans lines (problem, then a caret under the snippet): keep the error one line.
        raise ConfigError("config", source, f"not valid YAML: {' '.join(str(error).split())[:300]}") from None
    try:
        _check_strings(data, "")
    except ConfigError as error:
        raise error.within(source) from None
    return data
