"""Volcano's ``volcano-scheduler.conf``: read and edit the ``deviceshare`` plugin's arguments.

People write this file by hand (actions, tiers of plugins, ``configurations``, comments), so
Tessera edits it as text: it locates the ``deviceshare`` plugin with PyYAML's composer (which
keeps each node's position) and rewrites only the spans of the argument values it owns,
inserts the lines of those that are missing, and removes the lines of those it gave up.
Every other byte stays. A flow-style plugin or argument map (``{...}``) is rewritten as one
flow map, the only case where a span larger than a value changes.

Without a ``deviceshare`` plugin, Tessera adds one right after ``predicates`` in the tier
that holds ``predicates`` (the upstream examples' place), else at the end of the first tier.

An edit is checked before it is returned: the result parses, its arguments are exactly those
asked for, and everything outside them is equal to what was read — else ``ConfInvalid``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Scalar = bool | int | str


__all__ = [
    "CM_NAME",
    "CM_NAMESPACE",
    "CONFIG_PREFIX",
    "ENABLE_MINDCLUSTER",
    "ENABLE_VGPU",
    "ENABLE_VNPU",
    "INIT_PARAMS",
    "OWNED",
    "PLUGIN",
    "POLICY",
    "PREFIX",
    "PRESET_VIRTUAL_DEVICE",
    "WEIGHT",
    "ConfInvalid",
    "Scalar",
    "arguments",
    "configuration",
    "edit",
    "has_plugin",
    "remove_configuration",
    "remove_plugin",
    "scalar",
]

PLUGIN = "deviceshare"
PREFIX = "deviceshare."
ENABLE_VNPU = PREFIX + "AscendHAMiVNPUEnable"
ENABLE_MINDCLUSTER = PREFIX + "AscendMindClusterVNPUEnable"
ENABLE_VGPU = PREFIX + "VGPUEnable"
POLICY = PREFIX + "SchedulePolicy"
WEIGHT = PREFIX + "ScheduleWeight"
CM_NAME = PREFIX + "KnownGeometriesCMName"
CM_NAMESPACE = PREFIX + "KnownGeometriesCMNamespace"
INIT_PARAMS = "init-params"
CONFIG_PREFIX = INIT_PARAMS + "."
PRESET_VIRTUAL_DEVICE = CONFIG_PREFIX + "presetVirtualDevice"
"""A key of ``edit``'s ``wanted`` naming an argument of the ``configurations`` entry
``init-params`` (Volcano's MindCluster vNPU reads ``presetVirtualDevice`` there, a string)."""
OWNED = (
    ENABLE_VNPU,
    ENABLE_MINDCLUSTER,
    ENABLE_VGPU,
    POLICY,
    WEIGHT,
    CM_NAME,
    CM_NAMESPACE,
    PRESET_VIRTUAL_DEVICE,
)


class ConfInvalid(ValueError):
    """The conf cannot be read (or edited safely); ``line``/``column`` count from 1."""

    def __init__(self, problem: str, line: int = 0, column: int = 0) -> None:
        where = f"line {line}, column {column}: " if line else ""
        super().__init__(f"volcano-scheduler.conf {where}{problem}")
        self.problem, self.line, self.column = problem, line, column


@dataclass(frozen=True)
class _Found:
    root: MappingNode
    tier: MappingNode | None  # the tier whose plugins hold deviceshare (or predicates)
    plugins: SequenceNode | None
    plugin: MappingNode | None  # the deviceshare plugin's entry
    after: Node | None  # where a new plugin entry goes: after this entry


def arguments(text: str) -> dict[str, Any]:
    """The deviceshare plugin's arguments ({} when there is no such plugin)."""
    found = _locate(text)
    if found.plugin is None:
        return {}
    args = _value(found.plugin, "arguments")
    return dict(_construct(args) or {}) if args is not None else {}


def edit(text: str, wanted: Mapping[str, Scalar | None]) -> str:
    """``text`` with the deviceshare arguments of ``wanted`` set (None: removed), and those
    keyed ``init-params.<name>`` set in the ``init-params`` configuration; the same text when
    they already are. Raises ``ConfInvalid`` (nothing to write) when the conf does not parse
    or has no tiers."""
    plugin = {k: v for k, v in wanted.items() if not k.startswith(CONFIG_PREFIX)}
    config = {k[len(CONFIG_PREFIX) :]: v for k, v in wanted.items() if k.startswith(CONFIG_PREFIX)}
    out = _edit_arguments(text, plugin)
    if config:
        out = _edit_configuration(out, config)
    if out != text:
        _check(text, out, _merged(arguments(text), plugin), _merged(configuration(text), config))
    return out


def _merged(before: Mapping[str, Any], wanted: Mapping[str, Scalar | None]) -> dict[str, Any]:
    return {k: v for k, v in {**before, **wanted}.items() if v is not None}


def _edit_arguments(text: str, wanted: Mapping[str, Scalar | None]) -> str:
    before = arguments(text)
    target = {k: v for k, v in {**before, **wanted}.items() if v is not None}
    if all(_same(before.get(k), v) for k, v in wanted.items()):
        return text
    found = _locate(text)
    if found.plugin is None:
        return _add_plugin(text, found, target)
    return _edit_plugin(text, found.plugin, before, wanted, target)


def configuration(text: str, name: str = INIT_PARAMS) -> dict[str, Any]:
    """The arguments of the ``configurations`` entry ``name`` ({} when there is none)."""
    entry = _configuration(_locate(text).root, name)
    args = _value(entry, "arguments") if entry is not None else None
    return dict(_construct(args) or {}) if args is not None else {}


def remove_configuration(text: str, name: str = INIT_PARAMS) -> str:
    """``text`` without the ``configurations`` entry ``name`` when it has no arguments left
    (the entry Tessera added, given back), and without ``configurations`` when that was its
    only entry; else unchanged."""
    root = _locate(text).root
    entry = _configuration(root, name)
    entries = _configurations(root)
    if entry is None or entries is None or configuration(text, name) or entries.flow_style:
        return text
    if len(entries.value) == 1:
        key = next(k for k, x in root.value if x is entries)
        start = _line_start(text, key.start_mark.index)
    else:
        start = _line_start(text, entry.start_mark.index)
    return text[:start] + text[_line_end(text, _last_end(entry)) :]


def _configurations(root: MappingNode) -> SequenceNode | None:
    found = _value(root, "configurations")
    if found is None or (isinstance(found, ScalarNode) and found.value in ("", "null", "~")):
        return None
    if not isinstance(found, SequenceNode):
        raise ConfInvalid("configurations is not a list", *_at(found))
    return found


def _configuration(root: MappingNode, name: str) -> MappingNode | None:
    entries = _configurations(root)
    for entry in entries.value if entries is not None else ():
        key = _value(entry, "name") if isinstance(entry, MappingNode) else None
        if isinstance(key, ScalarNode) and key.value == name:
            assert isinstance(entry, MappingNode)
            return entry
    return None


def _edit_configuration(text: str, wanted: Mapping[str, Scalar | None]) -> str:
    """The ``init-params`` entry's arguments set (it is added, with ``configurations`` when
    missing, at the end of the document)."""
    root = _locate(text).root
    entry = _configuration(root, INIT_PARAMS)
    before = configuration(text)
    target = {k: v for k, v in {**before, **wanted}.items() if v is not None}
    if all(_same(before.get(k), v) for k, v in wanted.items()):
        return text
    if entry is not None:
        return _edit_plugin(text, entry, before, wanted, target, INIT_PARAMS)
    if not target:
        return text
    nl = _newline(text)
    body = "".join(f"    {k}: {scalar(v)}{nl}" for k, v in target.items())
    item = f"- name: {INIT_PARAMS}{nl}  arguments:{nl}{body}"
    entries = _configurations(root)
    prefix = text if text.endswith("\n") or not text else text + nl
    if entries is None:
        if _value(root, "configurations") is not None:  # an empty "configurations:"
            raise ConfInvalid(
                "configurations is empty; write configurations: [] or remove it", *_at(root)
            )
        return prefix + f"configurations:{nl}" + item
    if entries.flow_style or not entries.value:
        raise ConfInvalid(
            "the configurations list is not a block list; add an init-params entry by hand",
            *_at(entries),
        )
    last = entries.value[-1]
    line = text[_line_start(text, last.start_mark.index) : last.start_mark.index]
    lead = " " * (len(line.rstrip()) - 1)
    at = _line_end(text, _last_end(last))
    indented = "".join(lead + row + nl for row in item.split(nl) if row)
    head = text[:at] if text[:at].endswith("\n") else text[:at] + nl
    return head + indented + text[at:]


def _same(have: Any, want: Scalar | None) -> bool:
    return have is None if want is None else type(have) is type(want) and have == want


def _locate(text: str) -> _Found:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        raise ConfInvalid(str(err.problem or err.context), line, col) from None
    except yaml.YAMLError as err:
        raise ConfInvalid(str(err)) from None
    if not isinstance(root, MappingNode):
        where = _at(root) if root is not None else (1, 1)
        raise ConfInvalid("the document is not a map", *where)
    tiers = _value(root, "tiers")
    if not isinstance(tiers, SequenceNode) or not tiers.value:
        raise ConfInvalid("no tiers: a scheduler without plugins", *_at(tiers or root))
    first: tuple[MappingNode | None, SequenceNode | None, Node | None] = (None, None, None)
    for tier in tiers.value:
        plugins = _value(tier, "plugins") if isinstance(tier, MappingNode) else None
        if not isinstance(tier, MappingNode) or not isinstance(plugins, SequenceNode):
            raise ConfInvalid("a tier without a plugins list", *_at(tier))
        for entry in plugins.value:
            name = _value(entry, "name") if isinstance(entry, MappingNode) else None
            if not isinstance(name, ScalarNode):
                raise ConfInvalid("a plugin without a name", *_at(entry))
            if name.value == PLUGIN:
                assert isinstance(entry, MappingNode)
                return _Found(root, tier, plugins, entry, None)
            if name.value == "predicates" and first[0] is None:
                first = (tier, plugins, entry)
    if first[0] is None:
        tier = tiers.value[0]
        plugins = _value(tier, "plugins")
        assert isinstance(plugins, SequenceNode) and isinstance(tier, MappingNode)
        first = (tier, plugins, plugins.value[-1] if plugins.value else None)
    return _Found(root, first[0], first[1], None, first[2])


def _at(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _value(mapping: Node, key: str) -> Node | None:
    if not isinstance(mapping, MappingNode):
        return None
    for k, v in mapping.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return v  # type: ignore[no-any-return]
    return None


def _construct(node: Node) -> Any:
    return yaml.SafeLoader("").construct_document(node)


def has_plugin(text: str) -> bool:
    """Whether the conf holds a deviceshare plugin (with or without arguments)."""
    return _locate(text).plugin is not None


def remove_plugin(text: str) -> str:
    """``text`` without the deviceshare plugin's entry, when it has no arguments left (the
    entry Tessera added, given back); else unchanged."""
    found = _locate(text)
    plugin = found.plugin
    if plugin is None or arguments(text) or plugin.flow_style:
        return text
    start = _line_start(text, plugin.start_mark.index)
    return text[:start] + text[_line_end(text, _last_end(plugin)) :]


def _edit_plugin(
    text: str,
    plugin: MappingNode,
    before: Mapping[str, Any],
    wanted: Mapping[str, Scalar | None],
    target: Mapping[str, Scalar],
    name: str = PLUGIN,
) -> str:
    args = _value(plugin, "arguments")
    if plugin.flow_style:
        whole = "{name: " + name + (", arguments: " + _flow(target) if target else "") + "}"
        return text[: plugin.start_mark.index] + whole + text[plugin.end_mark.index :]
    if args is None or not isinstance(args, MappingNode) or args.flow_style or not args.value:
        return _replace_arguments(text, plugin, args, target)
    if not target:  # none left: the arguments key goes too (not a null "arguments:")
        return _replace_arguments(text, plugin, args, target)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement), applied back to front
    keys = {k.value: (k, v) for k, v in args.value if isinstance(k, ScalarNode)}
    first_key = args.value[0][0]
    indent = " " * first_key.start_mark.column
    added = ""  # new keys go before the first one, in the order asked
    for key, want in wanted.items():
        if _same(before.get(key), want):
            continue
        if key in keys and want is None:
            k, v = keys[key]
            _editable(key, k, v, removing=True)
            edits.append((_line_start(text, k.start_mark.index), _line_end(text, _last_end(v)), ""))
        elif key in keys and want is not None:
            k, v = keys[key]
            _editable(key, k, v, removing=False)
            edits.append((v.start_mark.index, v.end_mark.index, scalar(want, v.style)))
        elif want is not None:
            added += f"{indent}{key}: {scalar(want)}{_newline(text)}"
    at = _line_start(text, first_key.start_mark.index)
    edits.append((at, at, added))
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _editable(key: str, k: Node, v: Node, *, removing: bool) -> None:
    """Tessera rewrites a plain (or quoted) value on its key's line, or removes a key whose
    value is its own; anything else is refused at the key's position in the person's file."""
    why = ""
    if v.start_mark.index < k.end_mark.index:
        why = "an alias (*name)"  # the node lies at its anchor, elsewhere in the file
    elif removing:
        pass
    elif not isinstance(v, ScalarNode):
        why = "not a single value"
    elif v.style in ("|", ">"):
        why = "a block scalar (| or >)"
    elif v.style is None and v.value == "":
        why = "empty (null)"
    if why:
        raise ConfInvalid(
            f"{key} is {why}: Tessera cannot edit it here; write a plain value", *_at(k)
        )


def _replace_arguments(
    text: str, plugin: MappingNode, args: Node | None, target: Mapping[str, Scalar]
) -> str:
    """No arguments, or a flow or empty map of them: rewritten as one map."""
    indent, nl = " " * plugin.value[0][0].start_mark.column, _newline(text)
    block = f"{indent}arguments:{nl}" + "".join(
        f"{indent}  {k}: {scalar(v)}{nl}" for k, v in target.items()
    )
    if args is None:
        at = _line_end(text, _last_end(plugin))
        return text[:at] + (block if target else "") + text[at:]
    if isinstance(args, MappingNode) and args.value and args.flow_style:  # keep it one map
        new = _flow(target) if target else "{}"
        return text[: args.start_mark.index] + new + text[args.end_mark.index :]
    key = next(k for k, v in plugin.value if v is args)
    start, end = _line_start(text, key.start_mark.index), _line_end(text, _last_end(args))
    return text[:start] + (block if target else "") + text[end:]


def _add_plugin(text: str, found: _Found, target: Mapping[str, Scalar]) -> str:
    if not target:
        return text
    assert found.plugins is not None
    if found.plugins.flow_style or found.after is None:
        raise ConfInvalid(
            "the plugins list holding predicates is not a block list; add a deviceshare "
            "plugin by hand",
            *_at(found.plugins),
        )
    line = text[_line_start(text, found.after.start_mark.index) : found.after.start_mark.index]
    dash = line.rstrip()
    if not dash.endswith("-"):
        raise ConfInvalid("cannot place a deviceshare plugin here", *_at(found.after))
    lead = " " * (len(dash) - 1)
    inner = " " * found.after.start_mark.column
    nl = _newline(text)
    body = "".join(f"{inner}  {k}: {scalar(v)}{nl}" for k, v in target.items())
    entry = f"{lead}- name: {PLUGIN}{nl}{inner}arguments:{nl}{body}"
    at = _line_end(text, _last_end(found.after))
    prefix = text[:at] if text[:at].endswith("\n") or not at else text[:at] + nl
    return prefix + entry + text[at:]


def _check(before: str, after: str, plugin: Mapping[str, Any], config: Mapping[str, Any]) -> None:
    """The edit changed only the deviceshare arguments, to exactly ``plugin``, and the
    ``init-params`` arguments, to exactly ``config``."""
    if arguments(after) != dict(plugin):
        raise ConfInvalid("Tessera's edit of the deviceshare arguments did not read back")
    if configuration(after) != dict(config):
        raise ConfInvalid("Tessera's edit of the init-params configuration did not read back")
    touched = set(configuration(before)) | set(config)
    old, new = yaml.safe_load(before), yaml.safe_load(after)
    if _without_ours(old, touched) != _without_ours(new, touched):
        raise ConfInvalid("Tessera's edit would change more than the deviceshare arguments")


def _without_ours(conf: Any, config: set[str]) -> Any:
    out = dict(conf)
    out["tiers"] = [
        {**t, "plugins": [p for p in t.get("plugins") or [] if p.get("name") != PLUGIN]}
        for t in conf.get("tiers") or []
    ]
    if config:
        entries = []
        for entry in out.get("configurations") or []:
            if isinstance(entry, dict) and entry.get("name") == INIT_PARAMS:
                args = {k: v for k, v in (entry.get("arguments") or {}).items() if k not in config}
                if not args and set(entry) <= {"name", "arguments"}:
                    continue  # Tessera's entry, or one holding only Tessera's arguments
                entries.append({**entry, "arguments": args})
                continue
            entries.append(entry)
        out["configurations"] = entries
    return out


# -- the text: values written as YAML that read back as themselves, line spans, a file's line
# ending, and where a composed node's text really ends


def _newline(text: str) -> str:
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


def _flow(target: Mapping[str, Scalar]) -> str:
    return "{" + ", ".join(f"{k}: {scalar(v)}" for k, v in target.items()) + "}"


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end + 1


def _last_end(node: Node) -> int:
    """Index just past the last scalar of ``node`` (a block collection's own end mark lies
    at the next token, possibly lines further down)."""
    if isinstance(node, MappingNode) and node.value and not node.flow_style:
        return _last_end(node.value[-1][1])
    if isinstance(node, SequenceNode) and node.value and not node.flow_style:
        return _last_end(node.value[-1])
    return int(node.end_mark.index)
