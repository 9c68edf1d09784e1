"""HAMi's ``vnpus`` section moved between its two shapes, its lines moved along.

Up to v2.8 HAMi reads ``vnpus`` as a list of chip entries; from v2.9 as
``{hamiVnpuCore, configs: [...]}``. When HAMi's version changes under a file, the section is
reshaped by moving its lines, not by re-dumping them: everything below ``vnpus:`` (a person's
comments included) goes under ``configs:`` two columns deeper, or back up two columns. A
flow-style or empty section is rewritten whole (it is one line).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from tessera.domain.schedulers import yaml_text

HAMI_VNPU_CORE = "hamiVnpuCore"


def to_map(text: str, node: yaml.Node, core: bool | None) -> str:
    """Everything below ``vnpus:`` (comments too) moved under ``configs:``, the wrapper's
    keys first."""
    wrapper: dict[str, Any] = {} if core is None else {HAMI_VNPU_CORE: core}
    key = _key(yaml_text.compose(text), "vnpus")
    if key is None or getattr(node, "flow_style", False) or not node.value:
        return yaml_text.set_key(
            text, [], "vnpus", {**wrapper, "configs": (yaml.safe_load(text) or {})["vnpus"]}
        )
    start = _after_line(text, key)
    _, end = yaml_text.span(text, node)
    pad = " " * (key.start_mark.column + yaml_text.INDENT)
    head = "".join(f"{pad}{k}: {yaml_text.scalar(v)}\n" for k, v in wrapper.items())
    block = yaml_text.shift(text[start:end], yaml_text.INDENT)
    return text[:start] + f"{head}{pad}configs:\n" + block + text[end:]


def to_list(text: str, node: yaml.Node, current: Mapping[str, Any]) -> str:
    """Everything below ``configs:`` (comments too) moved up under ``vnpus:``, in place of
    the wrapper."""
    key = _key(node, "configs")
    configs = yaml_text.find(node, ["configs"])
    if key is None or configs is None or getattr(configs, "flow_style", False) or not configs.value:
        return yaml_text.set_key(text, [], "vnpus", list(current.get("configs") or []))
    start, end = yaml_text.span(text, node)
    block = text[_after_line(text, key) : yaml_text.span(text, configs)[1]]
    return text[:start] + yaml_text.shift(block, -yaml_text.INDENT) + text[end:]


def _key(node: yaml.Node | None, name: str) -> yaml.Node | None:
    pairs = node.value if isinstance(node, yaml.MappingNode) else []
    return next((k for k, _ in pairs if getattr(k, "value", None) == name), None)


def _after_line(text: str, node: yaml.Node) -> int:
    """Where the line after the one ``node`` ends on starts."""
    found = text.find("\n", node.end_mark.index)
    return len(text) if found < 0 else found + 1
