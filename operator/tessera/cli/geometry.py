"""`tessera geometry`: the geometry engine on the command line, a contract scripts rely on.

    tessera geometry models [-o json]
    tessera geometry check --model MODEL [-o json] PROFILE... | -
    tessera geometry check --model MODEL --vgpu [-o json] TYPE[=COUNT]... | -
    tessera geometry list  --model MODEL [--maximal | --vgpu] [-o json]
    tessera geometry pack  --model MODEL [-o json] PROFILE=COUNT...  (at most 10000 in all)

Exit codes: 0 valid / done, 1 invalid (a layout that does not fit, a profile
the model lacks), 2 usage error (unknown model, malformed argument). With ``-``
instead of profiles, ``check`` reads one layout per line from stdin (profiles
separated by spaces, repeats allowed) and prints one JSON object per line, in
order; it exits 1 if any line is invalid. ``--model`` takes canonical ids and
GPU Feature Discovery product labels; ``--vgpu`` answers for NVIDIA vGPU types
instead (``geometry_vgpu``). All decisions live in
``tessera.domain.geometry``; this module only parses and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from tessera.cli import geometry_vgpu
from tessera.domain.geometry import catalog, enumeration, explaining, packing, placement

Handler = Callable[[argparse.Namespace, catalog.GpuModel], int]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "geometry",
        help="check, list and pack MIG layouts (and check vGPU types) per GPU model",
        description="The MIG geometry engine: which layouts fit which GPU model.",
    )
    parser.set_defaults(func=lambda _args: _usage(parser))
    sub = parser.add_subparsers(dest="geometry_command", metavar="COMMAND")

    models = sub.add_parser("models", help="list the known GPU models and their profiles")
    _output(models)
    models.set_defaults(func=_models)

    check = sub.add_parser("check", help="is a layout valid on a model, and where does it go")
    _model(check)
    _output(check)
    _vgpu(check)
    check.add_argument(
        "profiles",
        nargs="+",
        metavar="PROFILE",
        help="profiles (vGPU types with --vgpu, TYPE or TYPE=COUNT), or - for stdin",
    )
    check.set_defaults(func=_with_model(_check))

    listing = sub.add_parser("list", help="every valid (or maximal) layout of a model")
    _model(listing)
    listing.add_argument("--maximal", action="store_true", help="only layouts nothing fits beside")
    _vgpu(listing)
    _output(listing)
    listing.set_defaults(func=_with_model(_list))

    pack = sub.add_parser(
        "pack",
        help="fewest GPUs for a demand, with a layout for each",
        description="Fewest GPUs of MODEL that carry the demand, with a layout for each. A "
        f"demand totals at most {packing.MAX_INSTANCES} instances (exit 1 past it); optimality "
        f"is proven for packings of up to {packing.SEARCH_GPUS} GPUs, bigger ones print the "
        "lower bound.",
    )
    _model(pack)
    _output(pack)
    pack.add_argument("demand", nargs="+", metavar="PROFILE=COUNT")
    pack.set_defaults(func=_with_model(_pack))


def _model(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="canonical id or GFD product label")


def _vgpu(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vgpu",
        action="store_true",
        help="NVIDIA vGPU types of the board --model names (a GFD product label, a board "
        "or a GPU model), with the most that fit on one GPU",
    )


def _output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _with_model(handler: Handler) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        if getattr(args, "vgpu", False):
            return geometry_vgpu.run(args)
        try:
            model = catalog.resolve(args.model)
        except catalog.UnknownModelError as err:
            print(f"tessera geometry: {err}", file=sys.stderr)
            return 2
        return handler(args, model)

    return run


def _json(value: Any) -> None:
    print(json.dumps(value, separators=(", ", ": ")))


def _models(args: argparse.Namespace) -> int:
    if args.output == "json":
        _json([_model_dict(m) for m in catalog.models()])
        return 0
    for m in catalog.models():
        print(f"{m.id:<16} {m.max_instances} GIs  {', '.join(m.profile_names)}")
    return 0


def _model_dict(m: catalog.GpuModel) -> dict[str, Any]:
    return {
        "id": m.id,
        "name": m.name,
        "grid": m.grid,
        "max_instances": m.max_instances,
        "product_labels": list(m.product_labels),
        "profiles": [
            {
                "name": p.name,
                "id": p.profile_id,
                "compute_slices": p.compute_slices,
                "memory_slices": p.memory_slices,
                "memory_gib": p.memory_gib,
                "max_instances": p.max_instances,
                "starts": list(p.starts),
                "size": p.size,
                "status": p.status,
            }
            for p in m.profiles
        ],
    }


def _check(args: argparse.Namespace, model: catalog.GpuModel) -> int:
    if args.profiles == ["-"]:
        ok = True
        for line in sys.stdin:
            result = placement.place(model, Counter(line.split()))
            ok = ok and result.valid
            _json(result.as_dict())
        return 0 if ok else 1
    result = placement.place(model, Counter(args.profiles))
    if args.output == "json":
        _json(result.as_dict())
    else:
        print(f"{'valid' if result.valid else 'invalid'}: {result.reason}")
    return 0 if result.valid else 1


def _list(args: argparse.Namespace, model: catalog.GpuModel) -> int:
    found = enumeration.layouts(model, maximal=args.maximal)
    if args.output == "json":
        _json({"model": model.id, "maximal": args.maximal, "layouts": [dict(c) for c in found]})
        return 0
    for counts in found:
        print(explaining.fmt_counts(explaining.ordered(model, counts)))
    return 0


def _pack(args: argparse.Namespace, model: catalog.GpuModel) -> int:
    demand: dict[str, int] = {}
    for item in args.demand:
        name, sep, count = item.partition("=")
        if not sep or not count.isdigit():
            print(f"tessera geometry pack: {item!r} is not PROFILE=COUNT", file=sys.stderr)
            return 2
        digits = len(count.lstrip("0"))
        if digits > 18:  # past the limit anyway; int() of 5000 digits would raise
            limit = f"a demand totals at most {packing.MAX_INSTANCES} instances"
            print(
                f"tessera geometry pack: {name}: a {digits}-digit count; {limit}", file=sys.stderr
            )
            return 1
        demand[name] = demand.get(name, 0) + int(count)
    try:
        result = packing.pack(model, demand)
    except packing.DemandError as err:
        print(f"tessera geometry pack: {err}", file=sys.stderr)
        return 1
    if args.output == "json":
        _json(result.as_dict())
        return 0
    proof = "optimal" if result.optimal else f"lower bound {result.lower_bound}, not proven"
    print(f"{len(result.gpus)} x {model.id} ({proof})")
    print(packing.describe(result, model))
    return 0
