"""``agl-fast localizability fit|score|select``.

fit     tag fractions (a curated, tagged manifest) + a reference model's
        answers + the judges' contributions -> ``weights.json`` and the
        paper's views: top categories (Fig. 3), judge agreement (B.2),
        localizability by continent (Fig. 11)
score   adds ``l_k`` and ``localizable`` to a tagged manifest
select  keeps ``l_k > theta`` (and the clips screening did not reject),
        picks to a speech / non-speech mix (equal, ``--speech-share`` or
        ``--counts``; a side the pool cannot fill is reported with what to
        change) and writes a benchmark manifest in the AGL1K schema (read
        by ``query`` and ``evaluate`` as it is)

Typed errors print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from ..exceptions import AglError
from .fit import ALPHA, GAMMA_KM, MIN_SAMPLES, THETA
from .mix import BALANCE

__all__ = ["add_parser", "run"]

log = logging.getLogger("agl_fast.localizability")
_FMT = argparse.ArgumentDefaultsHelpFormatter


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``localizability`` and its three actions."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "localizability",
        help="Audio Localizability: fit weights, score clips, select a benchmark",
        formatter_class=_FMT,
    )
    sub = p.add_subparsers(dest="loc_command", metavar="ACTION")
    f = sub.add_parser("fit", help="fit a_i, abar_i and the P/N sets", formatter_class=_FMT)
    f.add_argument("--manifest", required=True, help="tagged clip table (curate output)")
    f.add_argument("--reference", required=True, help="reference model's answers (query output)")
    f.add_argument("--contributions", required=True, help="contributions.parquet (judge output)")
    f.add_argument("--judge-scores", default=None, help="judge_scores.parquet, for agreement")
    f.add_argument("--tags-column", default=None, help="tag fraction column (default: found)")
    f.add_argument("--aliases", default=None, help="country alias table (continent/country)")
    f.add_argument("--alpha", type=float, default=ALPHA, help="weight threshold of P and N")
    f.add_argument("--gamma-km", type=float, default=GAMMA_KM, help="error split (km)")
    f.add_argument("--theta", type=float, default=THETA, help="localizability threshold")
    f.add_argument("--min-samples", type=int, default=MIN_SAMPLES, help="clips behind a weight")
    f.add_argument("--top", type=int, default=10, help="categories in the top lists")
    f.add_argument("--figures", action="store_true", help="also write PNG charts (matplotlib)")
    f.add_argument("--out", required=True, help="output directory")
    f.set_defaults(run=run_fit)
    s = sub.add_parser("score", help="add l_k and localizable to a table", formatter_class=_FMT)
    s.add_argument("--weights", required=True, help="weights.json from fit")
    s.add_argument("--manifest", required=True, help="tagged clip table")
    s.add_argument("--tags-column", default=None, help="tag fraction column (default: found)")
    s.add_argument("--out", required=True, help="output table (.parquet or .csv)")
    s.set_defaults(run=run_score)
    c = sub.add_parser(
        "select", help="localizable clips, balanced, in the AGL1K schema", formatter_class=_FMT
    )
    c.add_argument("--manifest", required=True, help="scored table (score output)")
    c.add_argument("--weights", default=None, help="weights.json (its theta is the default)")
    c.add_argument("--theta", type=float, default=None, help=f"threshold (default: {THETA})")
    mix = c.add_mutually_exclusive_group()
    mix.add_argument(
        "--balance", choices=BALANCE, default="equal", help="equal split, or no mix at all"
    )
    mix.add_argument(
        "--speech-share",
        type=float,
        default=None,
        metavar="P",
        help="target share of speech clips in [0, 1] (the paper: 0.71)",
    )
    mix.add_argument(
        "--counts",
        default=None,
        metavar="SPEECH,NONSPEECH",
        help="target numbers of clips (the paper: 1025,419)",
    )
    c.add_argument("--n", type=int, default=None, help="benchmark size (default: all)")
    c.add_argument(
        "--screening",
        default=None,
        metavar="DB_URL",
        help="the game database holding screening decisions: rejected clips are left out",
    )
    c.add_argument(
        "--accepted-only", action="store_true", help="with --screening: only accepted clips"
    )
    c.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="keep every clip of a duplicate group (default: the group's best localizable "
        "clip only; groups from 'agl-fast dedup')",
    )
    c.add_argument("--speech-column", default=None, help="speech split column (default: found)")
    c.add_argument("--audio-dir", default=None, help="write mp3name relative to this folder")
    c.add_argument("--out", required=True, help="benchmark manifest (.csv or .parquet)")
    c.set_defaults(run=run_select)
    p.set_defaults(run=_usage(p))
    return p


def _usage(p: argparse.ArgumentParser) -> Any:
    def run(args: argparse.Namespace) -> int:
        p.print_usage(sys.stderr)
        return 2

    return run


def _guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (AglError, OSError) as exc:
            print(f"agl-fast localizability: {exc}", file=sys.stderr)
            return 2

    run.__doc__ = fn.__doc__
    return run


def _reference_errors(manifest_path: str, reference: str, keys: list[str], aliases: Any) -> Any:
    """Reference distance error per manifest key (km, NaN where unanswered),
    scored by the published AGL1K rules (a refusal is 10,000 km)."""
    import numpy as np

    from ..evaluate.readers import read_predictions, read_truth
    from ..evaluate.score import score

    truth = read_truth(manifest_path)
    pred, _ = read_predictions(reference)
    scored, _ = score(pred, truth, mode="agl1k", aliases_path=aliases)
    by_key = dict(zip(scored["question_id"], scored["distance_km"], strict=True))
    return np.array([by_key.get(k, np.nan) for k in keys], dtype=np.float64)


def _judge_matrices(path: str, keys: list[str], cats: tuple[str, ...]) -> dict[str, Any]:
    import numpy as np
    import pyarrow.parquet as pq

    t = pq.read_table(path).to_pylist()
    row = {k: j for j, k in enumerate(keys)}
    col = {c: j for j, c in enumerate(cats)}
    mats: dict[str, Any] = {}
    for r in t:
        m = mats.setdefault(r["judge"], np.full((len(keys), len(cats)), np.nan))
        k, c = row.get(r["key"]), col.get(r["category"])
        if k is not None and c is not None and r["status"] == "ok" and r["score"] is not None:
            m[k, c] = r["score"]
    return mats


@_guard
def run_fit(args: argparse.Namespace) -> int:
    """Fit the weights and write the reports."""
    import pyarrow.csv as pcsv

    from .. import manifest
    from .agreement import judge_agreement
    from .fit import contributions_matrix, fit_weights, read_contributions, score
    from .report import by_continent, top_categories, top_categories_chart
    from .tables import fraction_matrix

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = manifest.read_manifest(args.manifest)
    keys = [str(k) for k in table.column(manifest.KEY).to_pylist()]
    t, cats = fraction_matrix(table, column=args.tags_column)
    if not cats:
        raise AglError(f"{args.manifest}: no clip carries a tag; nothing to fit")
    aliases = args.aliases or str(Path(args.manifest).with_name("agl1k_country_aliases.tsv"))
    e = _reference_errors(args.manifest, args.reference, keys, aliases)
    c = contributions_matrix(read_contributions(args.contributions), keys, cats)
    w = fit_weights(
        t, e, c, cats,
        alpha=args.alpha, gamma_km=args.gamma_km, theta=args.theta, min_samples=args.min_samples,
    )  # fmt: skip
    w.save(out / "weights.json")
    pcsv.write_csv(top_categories(w, args.top), str(out / "top_categories.csv"))
    lk, flag = score(w, t, cats)
    conts = (
        table.column("continent").to_pylist()
        if "continent" in table.column_names
        else [None] * len(keys)
    )
    pcsv.write_csv(by_continent(lk, conts, w.theta), str(out / "by_continent.csv"))
    info: dict[str, Any] = {
        "n_clips": len(keys),
        "n_categories": len(cats),
        "n_reference_errors": int((e == e).sum()),
        "n_good": int((e < w.gamma_km).sum()),
        "n_bad": int((e >= w.gamma_km).sum()),
        "n_judged_clips": int((c == c).any(axis=1).sum()),
        "positive": list(w.positive),
        "negative": list(w.negative),
        "n_localizable": int(flag.sum()),
    }
    if args.judge_scores:
        mats = _judge_matrices(args.judge_scores, keys, cats)
        if len(mats) >= 2:
            agree = judge_agreement(mats, top=args.top)
            pcsv.write_csv(agree, str(out / "judge_agreement.csv"))
            info["judge_agreement"] = agree.to_pylist()
    if args.figures:
        top_categories_chart(w, out / "top_categories.png", k=args.top)
    (out / "fit.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(info, indent=2))
    return 0


@_guard
def run_score(args: argparse.Namespace) -> int:
    """Add ``l_k`` and ``localizable``."""
    import numpy as np
    import pyarrow as pa

    from .. import manifest
    from .fit import score
    from .tables import fraction_matrix

    w = _load_weights(args.weights)
    table = manifest.read_manifest(args.manifest)
    t, cats = fraction_matrix(table, column=args.tags_column)
    if cats:
        lk, flag = score(w, t, cats)
    else:  # no clip carries a tag: nothing adds to l_k
        lk, flag = np.zeros(table.num_rows), np.zeros(table.num_rows, dtype=bool)
    for name, arr in (("l_k", pa.array(lk, pa.float64())), ("localizable", pa.array(flag))):
        if name in table.column_names:
            table = table.drop_columns([name])
        table = table.append_column(name, arr)
    manifest.write_manifest(table, args.out)
    print(f"{table.num_rows} clips scored, {int(flag.sum())} with l_k > {w.theta}", file=sys.stderr)
    return 0


def _load_weights(path: str) -> Any:
    from .fit import LocalizabilityWeights

    try:
        return LocalizabilityWeights.load(path)
    except (ValueError, KeyError, TypeError) as exc:
        raise AglError(
            f"{path}: not a weights file written by 'localizability fit' ({exc})"
        ) from None


def _screened(args: argparse.Namespace) -> tuple[set[str], set[str] | None]:
    """Keys rejected in screening, and the accepted ones when only they may be chosen."""
    if args.screening is None:
        if args.accepted_only:
            raise AglError("--accepted-only needs --screening DB_URL")
        return set(), None
    from ..game.screening import read_decisions

    decisions = read_decisions(args.screening)
    rejected = {k for k, d in decisions.items() if d.decision == "reject"}
    accepted = {k for k, d in decisions.items() if d.decision == "accept"}
    log.info("screening: %d accepted, %d rejected clips", len(accepted), len(rejected))
    return rejected, (accepted if args.accepted_only else None)


@_guard
def run_select(args: argparse.Namespace) -> int:
    """Select and write the benchmark manifest; the report goes to stderr."""
    from .. import manifest
    from .mix import parse_counts
    from .tables import benchmark_table, select_benchmark

    theta = args.theta
    if theta is None:
        theta = _load_weights(args.weights).theta if args.weights else THETA
    counts = parse_counts(args.counts) if args.counts is not None else None
    rejected, only = _screened(args)
    table = manifest.read_manifest(args.manifest)
    chosen, report = select_benchmark(
        table, theta=theta, balance=args.balance, n=args.n, speech=args.speech_column,
        speech_share=args.speech_share, counts=counts, exclude=rejected, only=only,
        keep_duplicates=args.keep_duplicates,
    )  # fmt: skip
    advice = report.pop("advice", [])
    if chosen.num_rows == 0:
        raise AglError(
            f"no clip selected (theta={theta}): {report['speech']} speech and "
            f"{report['nonspeech']} non-speech localizable clips"
            + (f"; {'; '.join(advice)}" if advice else "")
        )
    manifest.write_manifest(benchmark_table(chosen, args.audio_dir), args.out)
    if "target" not in report:
        report["balance"] = args.balance
    print(json.dumps({"theta": theta, **report}), file=sys.stderr)
    if advice:
        print("the target mix is not met:", file=sys.stderr)
        for line in advice:
            print(f"  {line}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch (set by the action's parser)."""
    return int(args.run(args))
