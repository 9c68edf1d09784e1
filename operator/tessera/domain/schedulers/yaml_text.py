"""Edits of a YAML text that keep every line they do not touch, byte for byte.

A config people wrote carries comments, key order and quoting that a parse and re-dump would
lose. So Tessera never re-dumps such a file: each edit finds the node it changes in the text
(PyYAML's composed nodes know where they start and end) and splices only those characters or
lines — a scalar's value, one key's lines, one list item's lines. Everything else, comments
included, stays as it was. Block style is written; a flow collection (``[...]``, ``{...}``)
that must grow is rewritten as a whole, being one line.

``Path``: keys (str) and list indexes (int) from the root mapping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Path = Sequence[str | int]
INDENT = 2


class YamlInvalidError(ValueError):
    """The text does not parse; ``line`` and ``column`` count from 1."""

    def __init__(self, line: int, column: int, problem: str) -> None:
        super().__init__(f"line {line}, column {column}: {problem}")
        self.line, self.column, self.problem = line, column, problem


def compose(text: str) -> MappingNode | None:
    """The root mapping (None: an empty document); ``YamlInvalidError`` otherwise."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = str(err.problem or "") + (f" ({err.context})" if err.context else "")
        raise YamlInvalidError(*where, problem) from None
    except yaml.YAMLError as err:
        raise YamlInvalidError(1, 1, str(err)) from None
    if root is None or (isinstance(root, ScalarNode) and root.tag.endswith(":null")):
        return None
    if not isinstance(root, MappingNode):
        raise YamlInvalidError(root.start_mark.line + 1, root.start_mark.column + 1, "not a map")
    return root


def find(root: Node | None, path: Path) -> Node | None:
    node = root
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, SequenceNode) or step >= len(node.value):
                return None
            node = node.value[step]
        else:
            pair = _pair(node, step)
            if pair is None:
                return None
            node = pair[1]
    return node


def scalar(value: Any) -> str:
    """One scalar as YAML writes it (``true``, ``10``, ``1.5``, ``''``, ``huawei.com/x``)."""
    dumped: str = yaml.safe_dump(value, default_flow_style=True, width=1 << 16)
    return dumped.removesuffix("\n").removesuffix("\n...").strip()


def render(key: str | None, value: Any, column: int) -> str:
    """``key: value`` (or a list item, key None, value a mapping) as block lines at ``column``."""
    pad = " " * column
    if key is None:
        lines = render_lines(value, column + INDENT)
        first = lines[0][column + INDENT :] if lines else "{}"
        return "".join([f"{pad}- {first}\n", *(f"{line}\n" for line in lines[1:])])
    if _flat(value):
        return f"{pad}{key}: {_inline(value)}\n"
    return f"{pad}{key}:\n" + "".join(f"{line}\n" for line in render_lines(value, column + INDENT))


def render_lines(value: Any, column: int) -> list[str]:
    pad = " " * column
    if isinstance(value, dict):
        out: list[str] = []
        for key, item in value.items():
            out += render(str(key), item, column).splitlines()
        return out
    if isinstance(value, list):
        out = []
        for item in value:
            if isinstance(item, dict) and not _scalars_only(item):
                out += render(None, item, column).splitlines()
            else:
                out.append(f"{pad}- {_inline(item)}")
        return out
    return [f"{pad}{scalar(value)}"]


def set_key(text: str, path: Path, key: str, value: Any) -> str:
    """``key`` of the mapping at ``path`` (which must exist) set to ``value``: a scalar's
    characters replaced, a collection's lines rewritten, a missing key added at the end."""
    root = compose(text)
    parent = root if not path else find(root, path)
    if root is None or parent is None:
        if path:
            raise KeyError(f"no mapping at {list(path)}")
        return _append(text, render(key, value, 0))
    if not isinstance(parent, MappingNode):
        raise KeyError(f"no mapping at {list(path)}")
    pair = _pair(parent, key)
    if parent.flow_style:
        return _splice(text, parent, _inline({**_plain(parent), key: value}))
    if pair is None:
        column = parent.value[0][0].start_mark.column if parent.value else 0
        return _insert_after(text, parent, render(key, value, column))
    old_key, old = pair
    if isinstance(old, ScalarNode) and old.value != "" and _flat(value):
        return _splice(text, old, _inline(value))
    start, end = _line_start(text, old_key), _line_end(text, _end(old))
    return text[:start] + render(key, value, old_key.start_mark.column) + text[end:]


def remove_key(text: str, path: Path, key: str) -> str:
    parent = find(compose(text), path) if path else compose(text)
    pair = _pair(parent, key)
    if pair is None or not isinstance(parent, MappingNode):
        return text
    if parent.flow_style:
        rest = {k: v for k, v in _plain(parent).items() if k != key}
        return _splice(text, parent, _inline(rest))
    return text[: _line_start(text, pair[0])] + text[_line_end(text, _end(pair[1])) :]


def set_item(text: str, path: Path, index: int | None, value: Any) -> str:
    """Item ``index`` of the list at ``path`` replaced by ``value`` (None: appended)."""
    seq = find(compose(text), path)
    if not isinstance(seq, SequenceNode):
        raise KeyError(f"no list at {list(path)}")
    if seq.flow_style or not seq.value:
        items = _plain(seq)
        items = [*items, value] if index is None else [*items[:index], value, *items[index + 1 :]]
        return _set_parent(text, path, items)
    dash = seq.start_mark.column if index is None else _dash(seq.value[index])
    block = "".join(f"{line}\n" for line in render_lines([value], dash))
    if index is None:
        return _insert_after(text, seq, block)
    item = seq.value[index]
    start = text.rfind("\n", 0, item.start_mark.index) + 1
    return text[:start] + block + text[_line_end(text, _end(item)) :]


def remove_item(text: str, path: Path, index: int) -> str:
    seq = find(compose(text), path)
    if not isinstance(seq, SequenceNode) or index >= len(seq.value):
        return text
    if seq.flow_style or len(seq.value) == 1:
        return _set_parent(text, path, [v for i, v in enumerate(_plain(seq)) if i != index])
    item = seq.value[index]
    start = text.rfind("\n", 0, item.start_mark.index) + 1
    return text[:start] + text[_line_end(text, _end(item)) :]


def shift_lines(text: str, node: Node, by: int) -> str:
    """The lines of ``node`` (a block collection) indented ``by`` more columns (or fewer)."""
    start, end = span(text, node)
    return text[:start] + shift(text[start:end], by) + text[end:]


def shift(lines: str, by: int) -> str:
    """Every non-blank line indented ``by`` more columns (``by`` < 0: fewer, where blank)."""
    out = []
    for line in lines.splitlines(keepends=True):
        if not line.strip():
            out.append(line)
        elif by >= 0:
            out.append(" " * by + line)
        else:
            out.append(line[-by:] if line[:-by].strip() == "" else line)
    return "".join(out)


def span(text: str, node: Node) -> tuple[int, int]:
    """The whole lines ``node`` occupies: (start of its first line, end of its last)."""
    return text.rfind("\n", 0, node.start_mark.index) + 1, _line_end(text, _end(node))


def _set_parent(text: str, path: Path, value: Any) -> str:
    *up, last = path
    if isinstance(last, int):
        raise KeyError(f"no list key at {list(path)}")
    return set_key(text, up, last, value)


def _pair(node: Node | None, key: str) -> tuple[Node, Node] | None:
    if not isinstance(node, MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return k, v
    return None


def _plain(node: Node) -> Any:
    return yaml.safe_load(yaml.serialize(node))


def _end(node: Node) -> int:
    """Where the node's last character is (a block collection's end mark lies at the next
    token, past any comments: its last child's end is used instead)."""
    if isinstance(node, MappingNode | SequenceNode) and not node.flow_style and node.value:
        last = node.value[-1]
        return _end(last[1] if isinstance(last, tuple) else last)
    return int(node.end_mark.index)


def _dash(item: Node) -> int:
    return int(item.start_mark.column) - INDENT


def _line_start(text: str, node: Node) -> int:
    return text.rfind("\n", 0, node.start_mark.index) + 1


def _line_end(text: str, index: int) -> int:
    if index > 0 and text[index - 1] == "\n":
        return index
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1


def _insert_after(text: str, node: Node, block: str) -> str:
    at = _line_end(text, _end(node))
    if at == len(text) and text and not text.endswith("\n"):
        return text + "\n" + block
    return text[:at] + block + text[at:]


def _append(text: str, block: str) -> str:
    return (text if not text or text.endswith("\n") else text + "\n") + block


def _splice(text: str, node: Node, value: str) -> str:
    return text[: node.start_mark.index] + value + text[_end(node) :]


def _flat(value: Any) -> bool:
    return not isinstance(value, dict | list) or not value


def _scalars_only(value: dict[str, Any]) -> bool:
    return all(_flat(v) for v in value.values())


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_inline(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return scalar(value)
