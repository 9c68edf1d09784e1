"""What keeps Tessera's edits of HAMi's ``device-config.yaml`` from touching a person's keys.

``yaml_text`` splices text at the places PyYAML's composed nodes say; an alias (``*n``) is
composed as the node it names, so its marks are the anchor's — an edit there would land at
the anchor's definition, a person's key elsewhere in the file. So, before planning,
``refuse`` rejects the file when an alias, an anchor or a merge key (``<<``) sits in a
section Tessera edits (``vnpus``, ``nvidia``), naming its line and column; and after
planning, ``check`` proves the edit: the result parses and, read as data, equals the file
as it was outside Tessera's fields (its chip entries, ``vnpus.hamiVnpuCore``, the ``nvidia``
scalings, the ``vnpus`` shape, sections it created). Either failure is ``NotEditable`` —
a ``YamlInvalidError``, so the file is left as it is and reported with where.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import yaml
from yaml.events import AliasEvent, NodeEvent, ScalarEvent

from tessera.domain.schedulers.yaml_text import YamlInvalidError, compose

SECTIONS = ("vnpus", "nvidia")
NVIDIA_FIELDS = ("deviceSplitCount", "deviceMemoryScaling", "deviceCoreScaling")


class NotEditable(YamlInvalidError):
    """The file parses, but Tessera cannot edit it without touching a person's keys."""


def refuse(text: str) -> None:
    """``NotEditable`` at the first alias, anchor or merge key inside ``vnpus`` or
    ``nvidia`` (``YamlInvalidError`` if the file does not parse)."""
    root = compose(text)
    if root is None:
        return
    starts = sorted(k.start_mark.index for k, _ in root.value)
    spans = []
    for key, _value in root.value:
        if getattr(key, "value", None) in SECTIONS:
            later = [s for s in starts if s > key.start_mark.index]
            spans.append((key.value, key.start_mark.index, later[0] if later else len(text)))
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        mark = event.start_mark
        at = mark.index if mark is not None else -1
        section = next((name for name, a, b in spans if a <= at < b), None)
        what = _what(event) if section is not None else ""
        if what and mark is not None:
            raise NotEditable(
                mark.line + 1,
                mark.column + 1,
                f"{what} in {section}: Tessera edits that section and cannot do so "
                "around aliases, anchors or merge keys; write those values out",
            )


def _what(event: Any) -> str:
    if isinstance(event, AliasEvent):
        return f"an alias (*{event.anchor})"
    if isinstance(event, NodeEvent) and event.anchor:
        return f"an anchor (&{event.anchor})"
    if isinstance(event, ScalarEvent) and event.value == "<<" and event.style is None:
        return "a merge key (<<)"
    return ""


def check(before: str, after: str, chips: Collection[str]) -> None:
    """``NotEditable`` unless ``after`` parses and equals ``before`` outside Tessera's
    fields; ``chips``: the chips whose entries are Tessera's (before or after the edit)."""
    if after == before:
        return
    try:
        new = yaml.safe_load(after)
    except yaml.YAMLError as err:
        raise NotEditable(
            1, 1, f"Tessera's edit would not parse ({err}); nothing written"
        ) from None
    old = yaml.safe_load(before)
    if _rest(old, chips) != _rest(new, chips):
        raise NotEditable(
            1, 1, "Tessera's edit would change keys outside its fields; nothing written"
        )


def _rest(doc: Any, chips: Collection[str]) -> Any:
    """The document without Tessera's fields (and with ``vnpus`` in one shape)."""
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        return doc
    out = dict(doc)
    vnpus = out.pop("vnpus", None)
    if isinstance(vnpus, dict):
        extra = {k: v for k, v in vnpus.items() if k not in ("configs", "hamiVnpuCore")}
        entries = vnpus.get("configs")
    else:
        extra, entries = {}, vnpus
    kept = [
        e for e in entries or [] if not (isinstance(e, dict) and str(e.get("chipName")) in chips)
    ]
    if kept or extra:
        out["vnpus"] = {"configs": kept, **extra}
    nvidia = out.pop("nvidia", None)
    if isinstance(nvidia, dict):
        nvidia = {k: v for k, v in nvidia.items() if k not in NVIDIA_FIELDS}
    if nvidia:
        out["nvidia"] = nvidia
    return out
