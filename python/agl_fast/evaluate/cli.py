"""``agl-fast evaluate PRED [PRED ...] --truth MANIFEST --out DIR``.

The headline is the paper-comparable ``agl1k`` mode (the published rules,
quirks included); ``strict`` is reported beside it (``--mode both``, the
default), or alone with ``--mode strict``. ``--parser`` chooses who reads
the raw answers in ``agl1k`` mode (:mod:`.parsers`); ``--compare A B`` adds
a paired bootstrap comparison; every output carries the provenance of
:mod:`.provenance`.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from ..exceptions import AglError, ParameterError
from .parsers import DEFAULT_PARSER, PARSERS

_log = logging.getLogger("agl_fast.evaluate")

# Kept free of heavy imports: the evaluation stack (pandas, ...) loads in run().
MODES = ("agl1k", "strict")
MODE_CHOICES = ("both", *MODES)
#: Group columns of the regional tables, and their file suffix.
REGIONS = {"true_continent": "by_continent", "true_country": "by_country"}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``evaluate`` subcommand."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "evaluate",
        help="score prediction files against the AGL1K ground truth",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("pred", nargs="+", help="prediction files (.json, .jsonl, .csv, .parquet)")
    p.add_argument(
        "--truth", required=True, help="ground-truth manifest (geoLocalization_schema.csv, ...)"
    )
    p.add_argument(
        "--mode",
        choices=MODE_CHOICES,
        default="both",
        help="agl1k: the published rules (headline, comparable with the paper); strict: "
        "sound rules; both: agl1k first, strict beside it",
    )
    p.add_argument(
        "--aliases",
        default=None,
        help="country alias table (default: agl1k_country_aliases.tsv next to --truth)",
    )
    p.add_argument(
        "--parser",
        choices=PARSERS,
        default=DEFAULT_PARSER,
        help="agl1k mode: the predicted fields as the file holds them (stored; agl-fast's query "
        "stores its own parser's reading), or each raw answer read again by agl-fast's parser "
        "(agl-fast) or as the AGL1K reference code read it (upstream: what it cannot read "
        "scores as a 10,000 km refusal, as in the paper); strict mode always uses agl-fast's",
    )
    p.add_argument(
        "--compare",
        nargs=2,
        action="append",
        default=[],
        metavar=("A", "B"),
        help="paired bootstrap of A minus B on their common clips (model names or prediction "
        "files among PRED); repeatable; writes paired.csv and a leaderboard section",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and RANDOM")
    p.add_argument(
        "--baselines",
        action="store_true",
        help="add the RANDOM row and the paper's B.7 statistical baselines (densest region, "
        "median location) to the leaderboard",
    )
    p.add_argument(
        "--cues",
        action="store_true",
        help="cue analysis of the reasoning texts (rule-based, section 4.3): cues.csv, "
        "and cues.png with --figures",
    )
    p.add_argument("--figures", action="store_true", help="also write PNG figures (matplotlib)")
    p.add_argument(
        "--note",
        action="append",
        default=[],
        help="a line to state under the leaderboard's heading (e.g. how the truth set was "
        "made); repeatable",
    )
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Typed errors (a bad file, a bad table) print one line and exit 2."""
    try:
        return _run(args)
    except (AglError, OSError) as exc:
        print(f"agl-fast evaluate: {exc}", file=sys.stderr)
        return 2


def _check_join(path: str, jr: Any, truth_path: str, pred: Any, truth: Any) -> None:
    """Raise when a prediction file matches no truth key; warn on partial matches."""
    if jr.n_scored == 0:
        if jr.n_predictions == 0:
            raise ParameterError(f"{path}: no predictions to score (the file holds no answers)")
        if jr.n_excluded_answered == jr.n_predictions:
            raise ParameterError(
                f"{path}: every one of its {jr.n_predictions} predictions is for a truth clip "
                "with invalid coordinates; nothing can be scored"
            )
        p_keys = ", ".join(repr(k) for k in pred["question_id"].head(3))
        t_keys = ", ".join(repr(str(k)) for k in truth["key"].head(3))
        raise ParameterError(
            f"{path}: none of its {jr.n_predictions} predictions matches a key of the truth "
            f"{truth_path} (predictions: {p_keys}, ...; truth: {t_keys}, ...): is --truth "
            "the ground truth these answers were made for?"
        )
    if jr.n_unknown_keys:
        _log.warning(
            "%s: %d of %d predictions match no truth key and are not scored",
            path, jr.n_unknown_keys, jr.n_predictions,
        )  # fmt: skip
    if jr.n_excluded_answered:
        _log.warning(
            "%s: %d predictions are for truth clips with invalid coordinates and are not scored",
            path, jr.n_excluded_answered,
        )  # fmt: skip


Inputs = list[tuple[str, dict[str, Any], dict[str, Any]]]


def _inputs(args: argparse.Namespace, truth: Any, n_scorable: int) -> tuple[Inputs, dict[str, Any]]:
    """The prediction files (one per model, joined to the truth and
    checked) plus the paper's baselines when asked: ``(model, predictions
    by mode, log entry)``, and the clips each model answered. The ``agl1k``
    predictions are those of ``--parser``; ``strict`` reads the file's own."""
    from .baselines import PAPER_BASELINES, baseline_predictions
    from .parsers import apply_parser, log_parser_report
    from .readers import model_name, read_predictions
    from .score import join

    inputs: Inputs = []
    answered: dict[str, Any] = {}
    for path in args.pred:
        pred, rr = read_predictions(path)
        name = model_name(path)
        if name in answered:
            raise ParameterError(f"{path}: a second prediction file of the model {name!r}")
        joined, jr = join(pred, truth)
        _check_join(path, jr, args.truth, pred, truth)
        answered[name] = joined["question_id"]
        parsed, pr = apply_parser(pred, args.parser)
        log_parser_report(path, pr)
        cover = {"n": jr.n_scored, "n_truth": n_scorable, "coverage": jr.coverage}
        info = {"path": str(path), "read": vars(rr), "coverage": cover, "parser": pr.as_dict()}
        inputs.append((name, {"agl1k": parsed, "strict": pred}, info))
    if args.baselines:
        for row, name in PAPER_BASELINES.items():
            base = baseline_predictions(truth, name, seed=args.seed)
            inputs.append((row, {"agl1k": base, "strict": base}, {}))
    return inputs, answered


def _score_all(
    args: argparse.Namespace,
    truth: Any,
    inputs: Inputs,
    modes: tuple[Any, ...],
    common: Any,
    out: Path,
) -> tuple[Any, dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Score every model in every mode: the tidy metrics, the log, and the
    per-run scored rows, confusions, distances and maps for the figures."""
    import numpy as np
    import pandas as pd

    from .baselines import PAPER_BASELINES
    from .metrics import continent_confusion
    from .readers import COORDINATE_PROBLEM
    from .report import regional_table, tidy_metrics, truth_subset_sizes
    from .score import score

    sizes = truth_subset_sizes(truth[truth[COORDINATE_PROBLEM].isna()])
    aliases = _aliases_path(args)
    tables: list[Any] = []
    log: dict[str, dict[str, Any]] = {}
    plots: dict[str, dict[str, Any]] = {"confusions": {}, "dists": {}, "maps": {}, "scored": {}}
    for mode in modes:
        for model, preds, info in inputs:
            scored, jr = score(preds[mode], truth, mode=mode, aliases_path=aliases)
            scored.insert(0, "model", model)
            tag = f"{model}.{mode}"
            plots["scored"][tag] = scored
            scored.to_parquet(out / f"{tag}.rows.parquet", index=False)
            tables.append(tidy_metrics(model, scored, n_boot=args.n_boot, seed=args.seed,
                                       truth_sizes=sizes, common=common))  # fmt: skip
            if model in PAPER_BASELINES:
                continue
            plots["confusions"][tag] = continent_confusion(scored)
            plots["confusions"][tag].to_csv(out / f"{tag}.confusion.csv")
            plots["dists"][tag] = scored["distance_km"].to_numpy()
            located = scored.merge(
                truth[["key", "latitude", "longitude"]], left_on="question_id", right_on="key"
            )
            plots["maps"][tag] = (
                located["latitude"].to_numpy(np.float64),
                located["longitude"].to_numpy(np.float64),
                located["distance_km"].to_numpy(np.float64),
                jr.coverage,
            )
            for by, suffix in REGIONS.items():
                regional_table(scored, by, n_boot=args.n_boot, seed=args.seed).to_csv(
                    out / f"{tag}.{suffix}.csv", index=False
                )
            log.setdefault(model, dict(info))[f"join_{mode}"] = vars(jr)
    return pd.concat(tables, ignore_index=True), log, plots


def _board(tidy: Any, modes: tuple[Any, ...], compare: Any, notes: list[str]) -> str:
    """``leaderboard.md``: a heading, any warning, then each mode's table
    (and its common-subset table when the runs answered different clips),
    its intervals and its Tables 2, 5 and 6."""
    from .board import interval_tables
    from .report import COMMON, leaderboard

    board = notes[0] + "\n\n" + (f"**Warning:** {notes[1]}.\n\n" if notes[1] else "")
    for m in modes:
        part = tidy[tidy["mode"] == m]
        board += f"## {m}{' (headline: the published rules)' if m == 'agl1k' else ''}\n\n"
        board += leaderboard(part) + "\n"
        if compare:
            board += f"### common subset ({m}): the {len(compare)} clips every run answered\n\n"
            board += leaderboard(part, subset=COMMON) + "\n"
        board += interval_tables(tidy, m) + "\n"
    return board


def _figures(
    args: argparse.Namespace,
    inputs: Inputs,
    plots: dict[str, dict[str, Any]],
    modes: tuple[Any, ...],
    out: Path,
) -> None:
    """The cue table and chart (``--cues``) and the figures (``--figures``)."""
    from .baselines import PAPER_BASELINES

    if args.cues:
        from .cues import cue_table, save_cue_chart

        cues = cue_table((m, p["strict"]) for m, p, _ in inputs if m not in PAPER_BASELINES)
        cues.to_csv(out / "cues.csv", index=False)
        if args.figures:
            save_cue_chart(cues[cues["n_texts"] > 0], out / "cues.png")
    if not args.figures:
        return
    from .figures import confusion_heatmap, error_cdfs, error_map

    maps, dists = plots["maps"], plots["dists"]
    for tag, conf in plots["confusions"].items():
        confusion_heatmap(conf, f"{tag} (n={len(maps[tag][2])})", out / f"{tag}.confusion.png")
    for mode in modes:
        d = {k.rsplit(".", 1)[0]: v for k, v in dists.items() if k.endswith(f".{mode}")}
        error_cdfs(d, f"distance error ({mode})", out / f"error_cdf.{mode}.png")
    for tag, (lat, lon, d, cov) in maps.items():
        title = f"{tag}: error by recording location (n={len(d)}, {cov:.1%} of the truth)"
        error_map(lat, lon, d, title, out / f"{tag}.map.png")


def _aliases_path(args: argparse.Namespace) -> str:
    return args.aliases or str(Path(args.truth).with_name("agl1k_country_aliases.tsv"))


def _pairs(args: argparse.Namespace, names: list[str]) -> list[tuple[str, str]]:
    """The ``--compare`` pairs as model names (a prediction file stands for its model)."""
    from .readers import model_name

    def resolve(token: str) -> str:
        if token in names:
            return token
        if model_name(token) in names:
            return model_name(token)
        raise ParameterError(f"--compare {token!r} is none of the scored models {names}")

    pairs = [(resolve(a), resolve(b)) for a, b in args.compare]
    if pairs and args.n_boot < 1:
        raise ParameterError("--compare needs bootstrap resamples: --n-boot >= 1")
    for a, b in pairs:
        if a == b:
            raise ParameterError(f"--compare needs two different models, got {a!r} twice")
    return pairs


def _paired(args: argparse.Namespace, pairs: list[tuple[str, str]], modes: tuple[Any, ...],
            scored: dict[str, Any]) -> Any:  # fmt: skip
    """The paired bootstrap of every pair in every mode (:func:`.board.paired_frame`)."""
    import pandas as pd

    from .board import PAIRED_COLUMNS, paired_frame
    from .metrics import paired_bootstrap

    frames = []
    for mode in modes:
        for a, b in pairs:
            sa, sb = scored[f"{a}.{mode}"], scored[f"{b}.{mode}"]
            if not set(sa["question_id"]) & set(sb["question_id"]):
                raise ParameterError(f"--compare {a} {b}: the two runs share no scored clip")
            res = paired_bootstrap(sa, sb, n_boot=args.n_boot, seed=args.seed)
            frames.append(paired_frame(mode, a, b, res))
    return (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=list(PAIRED_COLUMNS))
    )


def _write_tables(out: Path, tidy: Any, record: dict[str, Any], paired: Any) -> Any:
    """``metrics.parquet``/``.csv`` (each row with its model's provenance
    columns), ``metrics.json`` (provenance and rows) and ``paired.csv``."""
    import pandas as pd

    from .provenance import model_columns

    cols = pd.DataFrame([model_columns(record, m) for m in tidy["model"]], index=tidy.index)
    tidy = pd.concat([tidy, cols], axis=1)
    tidy.to_parquet(out / "metrics.parquet", index=False)
    tidy.to_csv(out / "metrics.csv", index=False)
    rows = json.loads(tidy.to_json(orient="records"))
    doc = {"provenance": record, "metrics": rows}
    (out / "metrics.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    if len(paired):
        paired.to_csv(out / "paired.csv", index=False)
    return tidy


def _run(args: argparse.Namespace) -> int:
    from .board import paired_markdown, provenance_markdown
    from .provenance import provenance
    from .readers import COORDINATE_PROBLEM, read_truth
    from .report import coverage_note

    truth = read_truth(args.truth)
    excluded = truth[truth[COORDINATE_PROBLEM].notna()]
    scorable = truth[truth[COORDINATE_PROBLEM].isna()]
    modes: tuple[Any, ...] = MODES if args.mode == "both" else (args.mode,)
    if args.parser != DEFAULT_PARSER and "agl1k" not in modes:
        raise ParameterError("--parser applies to agl1k mode; strict mode reads answers itself")
    inputs, answered = _inputs(args, truth, len(scorable))
    pairs = _pairs(args, [m for m, _, _ in inputs])
    common, warning = coverage_note(answered, len(scorable))
    if warning:
        _log.warning("%s", warning)
    compare = common if warning and common else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tidy, log, plots = _score_all(args, truth, inputs, modes, compare, out)
    paired = _paired(args, pairs, modes, plots["scored"])
    settings = {"mode": args.mode, "parser": args.parser, "n_boot": args.n_boot,
                "seed": args.seed, "interval": "percentile bootstrap 95%"}  # fmt: skip
    files = [(m, info["path"], p["strict"]) for m, p, info in inputs if "path" in info]
    record = provenance(args.truth, _aliases_path(args), files, settings)
    tidy = _write_tables(out, tidy, record, paired)
    head = f"truth: {Path(args.truth).name}, {len(scorable)} scorable clips"
    if len(excluded):
        head += f" ({len(excluded)} more excluded: invalid coordinates)"
    head += "".join(f"\n\n{line}" for line in args.note)
    board = _board(tidy, modes, compare, [head, warning])
    if len(paired):
        board += "## Paired comparisons\n\n" + paired_markdown(paired)
    board += "\n" + provenance_markdown(record)
    (out / "leaderboard.md").write_text(board, encoding="utf-8")
    log["truth"] = {
        "path": str(args.truth),
        "n_rows": len(truth),
        "n_scorable": len(scorable),
        "n_excluded_invalid_coordinates": len(excluded),
        "excluded": [
            {"key": str(k), "reason": str(r)}
            for k, r in zip(excluded["key"], excluded[COORDINATE_PROBLEM], strict=True)
        ],
    }
    log["notes"] = {"leaderboard": list(args.note)}
    log["comparison"] = {"same_clips": not warning, "n_common": len(common), "warning": warning}
    log["provenance"] = record
    (out / "report.json").write_text(json.dumps(log, indent=2, default=str), encoding="utf-8")
    _figures(args, inputs, plots, modes, out)
    print(board, end="")
    return 0
