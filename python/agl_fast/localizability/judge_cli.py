"""``agl-fast judge``: score how much each category contributed to a
model's reasoning, with judge models (see ``docs/alm.md``); the scores are
the contributions the localizability fit reads. It reads
predictions (:mod:`agl_fast.evaluate.readers`), clip categories (a tagged
manifest through :mod:`agl_fast.localizability.tables`, a list or a CSV)
and calls the models through :mod:`agl_fast.alm`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import httpx  # noqa: F401  (the command's dependency: checked on import)

from ..alm.options import add_request_options, exit_status, limits, request_params, sampling_free

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``judge``."""
    j: argparse.ArgumentParser = subparsers.add_parser(
        "judge", help="score category contributions of reasoning texts with judge models"
    )
    j.add_argument("pred", nargs="+", help="prediction files (agl-fast Parquet or AGL1K)")
    j.add_argument(
        "--judge", action="append", required=True, metavar="PROVIDER:MODEL",
        help="a judge model, PROVIDER:MODEL[@BASE_URL] (repeat for several)",
    )  # fmt: skip
    j.add_argument(
        "--manifest", default=None,
        help="tagged clip table (curate output): each clip's categories are its tags",
    )  # fmt: skip
    j.add_argument("--tags-column", default=None, help="tag fraction column of --manifest")
    j.add_argument(
        "--min-fraction", type=float, default=0.0,
        help="tags with a time fraction above this are listed (--manifest)",
    )  # fmt: skip
    j.add_argument("--categories", default=None, help="text file, one category a line")
    j.add_argument("--clip-categories", default=None, help="CSV with key,category rows")
    j.add_argument("--prompt", default="agl1k-contribution/v1", help="judge prompt id")
    add_request_options(j)
    j.set_defaults(run=run)
    return j


def _reasoning(paths: list[str]) -> dict[str, str]:
    """Each clip's reasoning text (the ``reason`` field, else the parsed
    answer's, else the whole output), the first file that has one winning."""
    from ..alm.parse import parse_answer
    from ..evaluate.readers import read_predictions

    reasoning: dict[str, str] = {}
    for path in paths:
        df, _ = read_predictions(path)
        for _, r in df.iterrows():
            text = r.get("reason") if "reason" in df.columns else None
            if not isinstance(text, str) or not text.strip():
                text = parse_answer(r.get("model_output")).reason or r.get("model_output")
            if isinstance(text, str) and text.strip():
                reasoning.setdefault(str(r["question_id"]), text.strip())
    return reasoning


def _categories(args: argparse.Namespace, reasoning: dict[str, str]) -> dict[str, list[str]]:
    """Each clip's categories: from a tagged manifest, a key,category CSV or
    one list for all."""
    from ..exceptions import ParameterError

    cats: dict[str, list[str]] = {}
    if args.manifest:
        from .. import manifest
        from .tables import clip_categories

        tagged = clip_categories(
            manifest.read_manifest(args.manifest), args.tags_column, min_fraction=args.min_fraction
        )
        cats = {k: v for k, v in tagged.items() if k in reasoning}
    elif args.clip_categories:
        import csv

        with open(args.clip_categories, encoding="utf-8", newline="") as fh:
            for rec in csv.DictReader(fh):
                if rec.get("key") in reasoning and rec.get("category", "").strip():
                    cats.setdefault(rec["key"], []).append(rec["category"].strip())
    elif args.categories:
        lines = Path(args.categories).read_text(encoding="utf-8").splitlines()
        listed = [c.strip() for c in lines if c.strip()]
        cats = {k: listed for k in reasoning}
    else:
        raise ParameterError("give --manifest TABLE, --categories FILE or --clip-categories CSV")
    if not cats:
        raise ParameterError("no clip has both a reasoning text and categories")
    return cats


def _judge(
    args: argparse.Namespace,
    spec: str,
    store: Any,
    cats: dict[str, list[str]],
    reasoning: dict[str, str],
    raw: dict[str, list[Any]],
) -> tuple[int, dict[str, dict[str, float] | None]]:
    """Run one judge model over every clip; append its scores to ``raw``
    and return its exit status and scores by clip."""
    from ..alm import cost, judges
    from ..alm.keys import resolve_key
    from ..alm.prompts import contribution_prompt, get_template
    from ..alm.providers import make_provider
    from ..alm.runner import Engine, Job
    from ..exceptions import ParameterError
    from ..remote.store import cache_key

    tmpl = get_template(args.prompt)
    params = request_params(args)
    name, at, url = spec.partition("@")
    prov, sep, model = name.partition(":")
    if not sep or not model or (at and not url):
        raise ParameterError(f"--judge must be PROVIDER:MODEL[@BASE_URL], got {spec!r}")
    provider = make_provider(
        prov, resolve_key(prov, required=prov != "vllm"), base_url=url or args.base_url,
        timeout=args.timeout, extra=sampling_free(params),
    )  # fmt: skip
    price = cost.lookup(model, prov, cost.load_prices(args.prices))
    if args.max_cost is not None and price is None:
        raise ParameterError(f"--max-cost needs a price for judge model {model!r}")
    jobs = []
    for k, cl in cats.items():
        prompt = contribution_prompt(cl, reasoning[k], tmpl)
        h = judges.input_hash(reasoning[k], cl)
        pt, _ = cost.estimate_tokens(prompt, 0.0, 0.0)
        jobs.append(Job(k, cache_key(prov, model, tmpl.sha256, h, params), prompt, h,
                        est_prompt_tokens=pt))  # fmt: skip
    engine = Engine(
        provider, model, store, params, tmpl.id, tmpl.sha256, judges.judge_class,
        price=price, limits=limits(args), max_cost=args.max_cost,
        rerun_failed=args.rerun_failed, progress=not args.no_progress,
    )  # fmt: skip
    code = exit_status(engine.run(jobs))
    scores: dict[str, dict[str, float] | None] = {}
    for jb in jobs:
        row = store.get(jb.cache_key)
        if row is None:
            continue
        if row["answer_class"] == "ok":
            obj = judges.first_json_object(row["raw_text"])
            s, _, status = judges.validate_scores(obj, cats[jb.key])
        else:
            s, status = None, row["answer_class"]
        scores[jb.key] = s
        for c in cats[jb.key]:
            raw["key"].append(jb.key)
            raw["judge"].append(spec)
            raw["category"].append(c)
            raw["score"].append(None if s is None else s[c])
            raw["status"].append(status)
    return code, scores


def run(args: argparse.Namespace) -> int:
    """Execute ``judge``; returns the exit status."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..alm import judges
    from ..remote.store import Store

    reasoning = _reasoning(args.pred)
    cats = _categories(args, reasoning)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    per_judge: dict[str, dict[str, dict[str, float] | None]] = {}
    raw: dict[str, list[Any]] = {f.name: [] for f in judges.SCORES_SCHEMA}
    code = 0
    with Store(out / "judges.sqlite") as store:
        for spec in args.judge:
            status, per_judge[spec] = _judge(args, spec, store, cats, reasoning, raw)
            code = max(code, status)
    pq.write_table(judges.aggregate(per_judge, cats), str(out / "contributions.parquet"))
    pq.write_table(pa.Table.from_pydict(raw, schema=judges.SCORES_SCHEMA),
                   str(out / "judge_scores.parquet"))  # fmt: skip
    return code
