"""``agl-fast analyze causes|cues``: the answer analyses of AGL1K sections 4.5 and 4.3.

``causes`` labels each model's country-level misses with one of the seven
error causes (Figure 7); ``cues`` says which cues each reasoning text uses
(Figure 5), by rule and, with ``--labeller``, by a language model. Both send
their prompts through the query harness (store, resume, retries, budget) and
validate every label against the closed set; a human-override CSV
(``key,label``, optional ``model``) wins over the model.

Exit status: 0 all labelled, 1 some cases without a valid label, 3 stopped
by ``--max-cost``, 4 stopped by an authentication failure; 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..alm.options import add_request_options
from ..exceptions import AglError

DEFAULT_ATTEMPTS = 2


def _shared(p: argparse.ArgumentParser, prompt: str) -> None:
    p.add_argument("pred", nargs="+", help="prediction files (.json, .jsonl, .csv, .parquet)")
    p.add_argument(
        "--labeller", default=None, metavar="PROVIDER:MODEL[@BASE_URL]",
        help="labelling model (without it: rule-based labels and overrides only)",
    )  # fmt: skip
    p.add_argument("--prompt", default=prompt, help="template id or @FILE (its id is stored)")
    p.add_argument(
        "--attempts", type=int, default=DEFAULT_ATTEMPTS,
        help="requests per item at most; an invalid label is asked again with the allowed list",
    )  # fmt: skip
    p.add_argument(
        "--overrides", default=None,
        help="human labels, CSV with key,label (and optional model) columns; they win",
    )  # fmt: skip
    p.add_argument("--figures", action="store_true", help="also write the PNG chart")
    add_request_options(p)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``analyze`` with its ``causes`` and ``cues`` subcommands."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "analyze", help="analyse answers: error causes (4.5), reasoning cues (4.3)"
    )
    sub = p.add_subparsers(dest="analysis", metavar="ANALYSIS", required=True)
    fmt = argparse.ArgumentDefaultsHelpFormatter
    c = sub.add_parser(
        "causes", help="label country-level errors with the seven causes", formatter_class=fmt
    )
    _shared(c, "agl-error-cause/v1")
    c.add_argument("--truth", required=True, help="ground-truth manifest")
    c.add_argument("--mode", choices=("agl1k", "strict"), default="agl1k", help="scoring rules")
    c.add_argument(
        "--aliases", default=None,
        help="country alias table (default: agl1k_country_aliases.tsv next to --truth)",
    )  # fmt: skip
    c.add_argument("--sample", type=int, default=None, help="label N random errors per model")
    c.add_argument("--sample-seed", type=int, default=0, help="seed of --sample")
    c.set_defaults(run=run_causes)
    q = sub.add_parser("cues", help="which cues the reasoning texts use", formatter_class=fmt)
    _shared(q, "agl-cues/v1")
    q.set_defaults(run=run_cues)
    return p


def _guard(fn: Any, args: argparse.Namespace) -> int:
    try:
        return int(fn(args))
    except (AglError, OSError) as exc:
        print(f"agl-fast analyze {args.analysis}: {exc}", file=sys.stderr)
        return 2


def run_causes(args: argparse.Namespace) -> int:
    """Typed errors print one line and exit 2."""
    return _guard(_run_causes, args)


def run_cues(args: argparse.Namespace) -> int:
    """Typed errors print one line and exit 2."""
    return _guard(_run_cues, args)


def _labeller(args: argparse.Namespace, items: list[Any], label_set: Any, tmpl: Any) -> Any:
    """Label ``items`` with ``--labeller``; returns ``(results by key, summary, spec)``."""
    from ..alm import cost
    from ..alm.keys import resolve_key
    from ..alm.labels import label_items
    from ..alm.options import limits, request_params, sampling_free
    from ..alm.providers import make_provider
    from ..alm.runner import Engine
    from ..exceptions import ParameterError
    from ..remote.store import Store

    spec = args.labeller
    name, at, url = spec.partition("@")
    prov, sep, model = name.partition(":")
    if not sep or not model or (at and not url):
        raise ParameterError(f"--labeller must be PROVIDER:MODEL[@BASE_URL], got {spec!r}")
    params = request_params(args)
    extra = sampling_free(params)
    price = cost.lookup(model, prov, cost.load_prices(args.prices))
    if args.max_cost is not None and price is None:
        raise ParameterError(f"--max-cost needs a price for labeller model {model!r}")
    provider = make_provider(
        prov, resolve_key(prov, required=prov != "vllm"), base_url=url or args.base_url,
        timeout=args.timeout, extra=extra,
    )  # fmt: skip
    out = Path(args.out)
    with Store(out / "labels.sqlite") as store:
        engine = Engine(
            provider, model, store, params, tmpl.id, tmpl.sha256, lambda r: "ok",
            price=price, limits=limits(args), max_cost=args.max_cost,
            rerun_failed=args.rerun_failed, progress=not args.no_progress,
        )  # fmt: skip
        results = label_items(engine, items, label_set, tmpl, attempts=args.attempts)
    return {r.key: r for r in results}, engine.summary


def _s(v: Any, missing: str = "?") -> str:
    """A table cell as text; missing values (None, NaN, blank) as ``missing``."""
    if v is None or (isinstance(v, float) and v != v):
        return missing
    t = str(v).strip()
    return t or missing


def _override(
    overrides: dict[tuple[str, str | None], tuple[str, ...]], key: str, model: str
) -> tuple[str, ...] | None:
    hit = overrides.get((key, model))
    return hit if hit is not None else overrides.get((key, None))


def _code(summary: Any, n_unlabelled: int) -> int:
    from ..alm.options import EXIT_FAILED, exit_status

    if summary is not None:
        code = exit_status(summary)
        if code not in (0, EXIT_FAILED):
            return code
    return EXIT_FAILED if n_unlabelled else 0


def _cause_cases(args: argparse.Namespace, tmpl: Any) -> list[dict[str, Any]]:
    """One case per misclassified answer (at most ``--sample`` per model):
    the places, the reasoning and the labelling prompt."""
    from ..alm.prompts import label_prompt
    from .causes import CAUSES, cause_case, misclassified
    from .cues import reasoning_texts
    from .readers import model_name, read_predictions, read_truth
    from .score import score

    truth = read_truth(args.truth)
    cities = dict(zip(truth["key"].astype(str), truth["city"], strict=False))
    aliases = args.aliases or str(Path(args.truth).with_name("agl1k_country_aliases.tsv"))
    if not Path(aliases).is_file():
        aliases = None
    cases: list[dict[str, Any]] = []
    for path in args.pred:
        pred, _ = read_predictions(path)
        model = model_name(path)
        scored, _ = score(pred, truth, mode=args.mode, aliases_path=aliases)
        miss = misclassified(scored)
        if args.sample is not None and len(miss) > args.sample:
            miss = miss.sample(n=args.sample, random_state=args.sample_seed)
        texts = reasoning_texts(pred)
        raw = pred.drop_duplicates("question_id")
        raw = raw.set_index(raw["question_id"].astype(str))
        for r in miss.itertuples(index=False):
            qid = str(r.question_id)
            p = raw.loc[qid]
            true_place = f"{_s(cities.get(qid))}, {_s(r.true_country)}"
            pred_place = f"{_s(p.get('predicted_city'))}, {_s(p.get('predicted_country'))}"
            answer = p.get("model_output")
            case = cause_case(true_place, pred_place, texts.get(qid), _s(answer, ""))
            cases.append({"model": model, "key": qid, "true_country": r.true_country,
                          "pred_country": r.pred_country, "refused": bool(r.refused),
                          "prompt": label_prompt(tmpl, CAUSES, case)})  # fmt: skip
    return cases


def _cause_row(
    args: argparse.Namespace, c: dict[str, Any], overrides: Any, results: Any, tmpl: Any
) -> dict[str, Any]:
    """A case's label row: an override, the refusal rule, or the model's label."""
    from .causes import LABEL_COLUMNS, REFUSAL

    hit = _override(overrides, c["key"], c["model"])
    row = {k: c.get(k) for k in LABEL_COLUMNS}
    row.update(labeller=None, prompt_id=None, prompt_hash=None, attempts=0, raw_text=None)
    if hit is not None:
        row.update(cause=hit[0], source="override", status="ok")
    elif c["refused"]:
        row.update(cause=REFUSAL, source="rule", status="ok")
    else:
        res = results.get(f"{c['model']}\x1f{c['key']}")
        if res is None:
            row.update(cause=None, source="none", status="unlabelled")
        else:
            row.update(
                cause=res.labels[0] if res.labels else None, source="model",
                status=res.status, attempts=res.attempts, raw_text=res.raw_text,
                labeller=args.labeller, prompt_id=tmpl.id, prompt_hash=tmpl.sha256,
            )  # fmt: skip
    return row


def _run_causes(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..alm.labels import LabelItem, LabelSet, read_overrides
    from ..alm.prompts import get_template
    from .causes import CAUSES, LABEL_COLUMNS, cause_table

    label_set = LabelSet("error-cause", tuple(CAUSES))
    tmpl = get_template(args.prompt)
    overrides = read_overrides(args.overrides, label_set) if args.overrides else {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = _cause_cases(args, tmpl)
    to_ask = [
        LabelItem(f"{c['model']}\x1f{c['key']}", c["prompt"])
        for c in cases
        if not c["refused"] and _override(overrides, c["key"], c["model"]) is None
    ]
    results: dict[str, Any] = {}
    summary = None
    if args.labeller and to_ask:
        results, summary = _labeller(args, to_ask, label_set, tmpl)
    rows = [_cause_row(args, c, overrides, results, tmpl) for c in cases]
    labels = pd.DataFrame(rows, columns=list(LABEL_COLUMNS))
    labels.to_csv(out / "causes.csv", index=False)
    table = cause_table(labels) if len(labels) else pd.DataFrame()
    table.to_csv(out / "cause_summary.csv", index=False)
    if args.figures and len(table):
        from .causes import save_cause_chart

        save_cause_chart(table, out / "causes.png")
    n_unlabelled = int(labels["cause"].isna().sum()) if len(labels) else 0
    info = {
        "prompt_id": tmpl.id, "prompt_hash": tmpl.sha256, "labeller": args.labeller,
        "mode": args.mode, "n_cases": len(labels), "n_unlabelled": n_unlabelled,
        "sources": labels["source"].value_counts().to_dict() if len(labels) else {},
        "statuses": labels["status"].value_counts().to_dict() if len(labels) else {},
        "overrides_unused": sorted(
            f"{m or '*'}/{k}" for k, m in overrides
            if not any(c["key"] == k and (m is None or c["model"] == m) for c in cases)
        ),
        "summary": None if summary is None else vars(summary),
    }  # fmt: skip
    (out / "run.json").write_text(json.dumps(info, indent=2, default=str), encoding="utf-8")
    if len(table):
        print(table.to_string(index=False))
    return _code(summary, n_unlabelled if args.labeller else 0)


def _run_cues(args: argparse.Namespace) -> int:
    import pandas as pd

    from ..alm.labels import LabelItem, LabelSet, read_overrides
    from ..alm.prompts import get_template, label_prompt
    from .cues import CUE_DEFINITIONS, CUES, cue_flags_table, cue_table, reasoning_texts
    from .readers import model_name, read_predictions

    label_set = LabelSet("cues", CUES, multi=True)
    tmpl = get_template(args.prompt)
    overrides = read_overrides(args.overrides, label_set) if args.overrides else {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    preds = [(model_name(p), read_predictions(p)[0]) for p in args.pred]
    tables = [cue_table(preds).assign(method="rules")]
    texts = [(m, str(k), t) for m, pred in preds for k, t in reasoning_texts(pred).items()]
    summary = None
    n_unlabelled = 0
    if args.labeller or overrides:
        to_ask = [
            LabelItem(f"{m}\x1f{k}", label_prompt(tmpl, CUE_DEFINITIONS, f"Reasoning text:\n{t}"))
            for m, k, t in texts
            if _override(overrides, k, m) is None
        ]
        results: dict[str, Any] = {}
        if args.labeller and to_ask:
            results, summary = _labeller(args, to_ask, label_set, tmpl)
        rows, flags = [], []
        for m, k, _ in texts:
            hit = _override(overrides, k, m)
            res = results.get(f"{m}\x1f{k}")
            if hit is not None:
                got, source, status, attempts, raw = hit, "override", "ok", 0, None
            elif res is not None:
                got, source, status = res.labels, "model", res.status
                attempts, raw = res.attempts, res.raw_text
            else:
                got, source, status, attempts, raw = None, "none", "unlabelled", 0, None
            rows.append({"model": m, "key": k, "labels": None if got is None else ";".join(got),
                         "source": source, "status": status, "attempts": attempts,
                         "labeller": args.labeller if source == "model" else None,
                         "prompt_id": tmpl.id if source == "model" else None,
                         "prompt_hash": tmpl.sha256 if source == "model" else None,
                         "raw_text": raw})  # fmt: skip
            if got is not None:
                flags.append({"model": m, **{c: c in got for c in CUES}})
        labels = pd.DataFrame(rows)
        labels.to_csv(out / "cue_labels.csv", index=False)
        n_unlabelled = int(labels["labels"].isna().sum()) if len(labels) else 0
        flag_frame = pd.DataFrame(flags, columns=["model", *CUES])
        tables.append(cue_flags_table(flag_frame, [m for m, _ in preds]).assign(method="llm"))
    table = pd.concat(tables, ignore_index=True)
    table.to_csv(out / "cues.csv", index=False)
    if args.figures:
        from .cues import save_cue_chart

        shown = table[table["n_texts"] > 0].copy()
        if shown["method"].nunique() > 1:
            shown["model"] = shown["model"] + " (" + shown["method"] + ")"
        if len(shown):
            save_cue_chart(shown, out / "cues.png")
    info = {"prompt_id": tmpl.id, "prompt_hash": tmpl.sha256, "labeller": args.labeller,
            "n_texts": len(texts), "n_unlabelled": n_unlabelled,
            "summary": None if summary is None else vars(summary)}  # fmt: skip
    (out / "run.json").write_text(json.dumps(info, indent=2, default=str), encoding="utf-8")
    print(table.to_string(index=False))
    return _code(summary, n_unlabelled if args.labeller else 0)
