"""``agl-fast evaluate PRED [PRED ...] --truth CSV --mode agl1k|strict --out DIR``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# Kept free of heavy imports: the evaluation stack (pandas, ...) loads in run().
MODES = ("agl1k", "strict")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``evaluate`` subcommand."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "evaluate", help="score prediction files against the AGL1K ground truth"
    )
    p.add_argument("pred", nargs="+", help="prediction files (.json, .jsonl, .csv, .parquet)")
    p.add_argument("--truth", required=True, help="geoLocalization_schema.csv")
    p.add_argument("--mode", choices=MODES, default="strict")
    p.add_argument(
        "--aliases",
        default=None,
        help="country alias table (default: agl1k_country_aliases.tsv next to --truth)",
    )
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--figures", action="store_true", help="also write PNG figures (matplotlib)")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Score every file; write metrics.parquet/csv, leaderboard.md, per-row scores."""
    import numpy as np
    import pandas as pd

    from .metrics import breakdown, continent_confusion
    from .readers import model_name, read_predictions, read_truth
    from .report import leaderboard, tidy_metrics
    from .score import score

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    truth = read_truth(args.truth)
    aliases = args.aliases or str(Path(args.truth).with_name("agl1k_country_aliases.tsv"))
    tables, log = [], {}
    dists: dict[str, Any] = {}
    confusions: dict[str, Any] = {}
    maps: dict[str, Any] = {}
    for path in args.pred:
        model = model_name(path)
        pred, rr = read_predictions(path)
        scored, jr = score(pred, truth, mode=args.mode, aliases_path=aliases)
        scored.insert(0, "model", model)
        scored.to_parquet(out / f"{model}.{args.mode}.rows.parquet", index=False)
        tables.append(tidy_metrics(model, scored, n_boot=args.n_boot, seed=args.seed))
        confusions[model] = continent_confusion(scored)
        confusions[model].to_csv(out / f"{model}.{args.mode}.confusion.csv")
        dists[model] = scored["distance_km"].to_numpy()
        located = scored.merge(
            truth[["key", "latitude", "longitude"]], left_on="question_id", right_on="key"
        )
        maps[model] = (
            located["latitude"].to_numpy(np.float64),
            located["longitude"].to_numpy(np.float64),
            located["distance_km"].to_numpy(np.float64),
        )
        breakdown(scored, "true_country").to_csv(
            out / f"{model}.{args.mode}.by_country.csv", index=False
        )
        log[model] = {"read": vars(rr), "join": vars(jr)}
    tidy = pd.concat(tables, ignore_index=True)
    tidy.to_parquet(out / "metrics.parquet", index=False)
    tidy.to_csv(out / "metrics.csv", index=False)
    (out / "leaderboard.md").write_text(leaderboard(tidy), encoding="utf-8")
    (out / "report.json").write_text(json.dumps(log, indent=2, default=str), encoding="utf-8")
    if args.figures:
        from .figures import confusion_heatmap, error_cdfs, error_map

        for model, conf in confusions.items():
            confusion_heatmap(
                conf, f"{model} ({args.mode})", out / f"{model}.{args.mode}.confusion.png"
            )
        error_cdfs(dists, f"distance error ({args.mode})", out / f"error_cdf.{args.mode}.png")
        for model, (lat, lon, d) in maps.items():
            error_map(
                lat,
                lon,
                d,
                f"{model}: error by recording location ({args.mode})",
                out / f"{model}.{args.mode}.map.png",
            )
    print(leaderboard(tidy), end="")
    return 0
