"""Text helpers for editing ``volcano-scheduler.conf`` in place (``conf``).

Values written as YAML text that reads back as themselves, line spans, a file's line
ending, and where a composed node's text really ends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

Scalar = bool | int | str


def newline(text: str) -> str:
    """The file's line ending (a CRLF file gets CRLF lines)."""
    return "\r\n" if "\r\n" in text else "\n"


def scalar(value: Scalar, style: str | None = None) -> str:
    """A value as YAML text: plain when it reads back as itself, else JSON-quoted; a string
    replacing a quoted one keeps its quotes (``style``: the node's)."""
    if isinstance(value, str) and style == "'" and "'" not in value:
        return f"'{value}'"
    if isinstance(value, str) and style == '"':
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    plain = str(value)
    try:
        if plain and yaml.safe_load(plain) == value and "#" not in plain and ": " not in plain:
            return plain
    except yaml.YAMLError:
        pass
    return json.dumps(value)


def flow(target: Mapping[str, Scalar]) -> str:
    return "{" + ", ".join(f"{k}: {scalar(v)}" for k, v in target.items()) + "}"


def line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end + 1


def last_end(node: Node) -> int:
    """Index just past the last scalar of ``node`` (a block collection's own end mark lies
    at the next token, possibly lines further down)."""
    if isinstance(node, MappingNode) and node.value and not node.flow_style:
        return last_end(node.value[-1][1])
    if isinstance(node, SequenceNode) and node.value and not node.flow_style:
        return last_end(node.value[-1])
    return int(node.end_mark.index)
