"""``agl-fast models list|show NAME``: the model registry
(:mod:`agl_fast.alm.models`): each model's Table 1 label, route, model id and
generation settings."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..alm.models import ModelSpec, get_model, models
from ..alm.options import ROUTES
from ..exceptions import ParameterError

__all__ = ["add_parser", "run"]

_COLUMNS = ("name", "Table 1", "group", "route", "model id", "settings")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "models",
        help="the paper's models: route, model id and generation settings",
        description="The model registry: the 16 models of the AGL1K paper's Table 1, each with "
        "the route that reaches it (an API, an OpenAI-compatible vLLM/SGLang server, or "
        "in-process transformers) and the generation settings of the AGL1K reference code. "
        "`agl-fast query --model NAME` applies them.",
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    ls = sub.add_parser("list", help="one line per model")
    ls.add_argument("--json", action="store_true", help="a JSON list instead of the table")
    ls.add_argument(
        "--route", default=None, help=f"only the models of one route ({', '.join(ROUTES)})"
    )
    ls.set_defaults(run=run)
    show = sub.add_parser("show", help="every field of one model")
    show.add_argument("name", help="registry name (see `models list`)")
    show.add_argument("--json", action="store_true", help="a JSON object instead of lines")
    show.set_defaults(run=run)
    return p


def _row(m: ModelSpec) -> tuple[str, ...]:
    route = m.route if m.needs is None or m.route != "transformers" else "external code"
    group = "open" if m.open_weights else "closed"
    return (m.name, m.display, group, route, m.model_id, m.generation.describe())


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _show(m: ModelSpec) -> str:
    d = m.as_dict()
    lines = [
        f"name:          {m.name}",
        f"Table 1 row:   {m.display} ({'open' if m.open_weights else 'closed'}-source group)",
        f"route:         {m.route}",
        f"model id:      {m.model_id}",
        f"generation:    {m.generation.describe()}",
        f"request:       {json.dumps(d['generation'], sort_keys=True)}",
        f"protocol:      {m.protocol}",
    ]
    if m.system_prompt:
        lines.append(f"system prompt: {m.system_prompt}")
    if m.needs:
        lines.append(f"needs:         {m.needs}")
    if m.alternatives:
        lines.append(f"also served by: {', '.join(m.alternatives)}")
    if m.notes:
        lines.append(f"notes:         {m.notes}")
    lines.append(f"query:         agl-fast query --model {m.name} --manifest CSV --out DIR")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.action == "show":
        m = get_model(args.name)
        print(json.dumps(m.as_dict(), indent=2) if args.json else _show(m))
        return 0
    specs = models()
    if args.route is not None:
        if args.route not in ROUTES:
            raise ParameterError(f"unknown route {args.route!r}; allowed: {', '.join(ROUTES)}")
        specs = [m for m in specs if m.route == args.route]
    if args.json:
        print(json.dumps([m.as_dict() for m in specs], indent=2))
    else:
        print(_table([_COLUMNS, *(_row(m) for m in specs)]))
    return 0
