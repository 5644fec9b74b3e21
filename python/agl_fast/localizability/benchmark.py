"""``agl-fast benchmark build CONFIG.toml``: the AGL1K method as one command
(``agl-fast benchmark demo`` runs its selection steps offline: :mod:`.demo`).

Steps, each the package's own command (called in-process), outputs under ``out``::

    curate       manifest + audio -> curated/curated.parquet (filters, tags)
    pool         the clips that passed -> pool.parquet
    reference    query the reference model on the pool -> reference/<model>.parquet
    reference    evaluate it -> reference_eval/
    judges       judge its reasoning, categories from the tags -> judges/
    fit          localizability fit -> localizability/weights.json (+ reports)
    score        localizability score -> scored.parquet
    select       localizability select -> benchmark.csv (AGL1K schema)
    models       query each benchmark model on benchmark.csv -> runs/<name>/
    leaderboard  evaluate every run -> leaderboard/ (states the duplicates removed)

Every step that calls a model is resumable (answers are cached), so running
the same config again sends nothing already answered. Config (paths are
relative to the config file)::

    out = "build"
    [curate]
    manifest = "crawl.csv"        # key, path (or mp3name), latitude, longitude, ...
    audio_dir = "audio"           # optional
    args = ["--tag", "speech"]    # more curate options
    fraction_scheme = "segments10"   # optional: or "time"
    dedup = true                  # default: group duplicate recordings (curate --dedup);
                                  # the pool keeps one clip per group
    [curate.thresholds]           # optional: quality filter (agl_fast.quality.DEFAULT_THRESHOLDS)
    rms_floor = 0.001
    [reference]
    provider = "gemini"
    model = "gemini-2.5-pro"
    base_url = "..."              # optional; args = [...] more query options
    [[judges]]                    # three in the paper
    provider = "openrouter"
    model = "..."                 # base_url optional
    judge_args = [...]            # (top level) options shared by the judges
    [localizability]              # alpha, gamma_km, theta, min_samples (paper's defaults)
    [select]                      # balance = "equal" | speech_share = 0.71 | counts = [1025, 419],
                                  # n, speech_column, screening = "sqlite:///game.sqlite",
                                  # keep_duplicates = true (every clip of a group)
    [[models]]                    # the benchmarked models (query options as above)
    [evaluate]                    # n_boot, aliases, mode
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import tomllib

from ..exceptions import AglError, ParameterError
from .steps import run_step

__all__ = ["add_parser", "build", "run"]

log = logging.getLogger("agl_fast.benchmark")

#: Exit statuses of a model step that let the chain go on (1: some items failed,
#: recorded as rows).
_GO_ON = (0, 1)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``benchmark build``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "benchmark",
        help="build a benchmark from a TOML config: curate to leaderboard",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sub = p.add_subparsers(dest="bench_command", metavar="ACTION")
    b = sub.add_parser(
        "build",
        help="run the whole chain of a config (resumable)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument("config", help="TOML file")
    b.set_defaults(run=run)
    from .demo import add_demo_parser

    add_demo_parser(sub)

    def usage(args: argparse.Namespace) -> int:
        p.print_usage(sys.stderr)
        return 2

    p.set_defaults(run=usage)
    return p


def _section(cfg: dict[str, Any], name: str, required: bool = True) -> dict[str, Any]:
    v = cfg.get(name)
    if v is None:
        if required:
            raise ParameterError(f"config: missing [{name}] section")
        return {}
    if not isinstance(v, dict):
        raise ParameterError(f"config: [{name}] must be a table, got {type(v).__name__}")
    return v


def _model_args(sec: dict[str, Any], where: str) -> list[str]:
    for k in ("provider", "model"):
        if not isinstance(sec.get(k), str) or not sec[k]:
            raise ParameterError(f"config: {where} needs a string {k!r}")
    out = ["--provider", sec["provider"], "--model", sec["model"]]
    if sec.get("base_url"):
        out += ["--base-url", str(sec["base_url"])]
    return out + [str(a) for a in sec.get("args", [])]


def curate_filter_args(cur: dict[str, Any]) -> list[str]:
    """``curate`` flags from ``[curate] fraction_scheme`` and
    ``[curate.thresholds]`` (names and values checked by the quality-filter
    registry, :func:`agl_fast.quality_filters.check_thresholds`)."""
    from ..pipeline.filter_flags import flag_of
    from ..quality_filters import check_thresholds, defaults

    argv: list[str] = []
    if "fraction_scheme" in cur:
        argv += ["--fraction-scheme", str(cur["fraction_scheme"])]
    th = cur.get("thresholds", {})
    if not isinstance(th, dict):
        raise ParameterError("config: [curate] thresholds must be a table")
    known = defaults()
    for name in th:
        if name not in known:
            raise ParameterError(
                f"config: unknown [curate.thresholds] {name!r}; allowed: {sorted(known)}"
            )
    checked = check_thresholds(th)
    for name in th:
        argv += [flag_of(name), repr(checked[name])]
    return argv


def _output_name(model: str) -> str:
    from ..alm.query import output_name

    return output_name(model)


def _load(config: str | Path) -> tuple[dict[str, Any], Path]:
    """The parsed configuration and the folder its paths are relative to."""
    cfg_path = Path(config)
    if not cfg_path.is_file():
        raise ParameterError(f"config not found: {cfg_path}")
    try:
        cfg = tomllib.loads(cfg_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ParameterError(f"{cfg_path}: not valid TOML ({exc})") from None
    return cfg, cfg_path.resolve().parent


def _curate(cur: dict[str, Any], out: Path, path: Any, keep_duplicates: bool) -> tuple[Path, str]:
    """Step 1 and 2: curate the corpus (duplicate recordings grouped unless
    ``[curate] dedup = false``), keep the clips that passed, one per
    duplicate group unless ``keep_duplicates`` (the pool); return the pool
    and the line the leaderboard states about duplicates."""
    from .. import manifest
    from ..pipeline.dedup import has_groups, one_per_group

    dedup = cur.get("dedup", True)
    if not isinstance(dedup, bool):
        raise ParameterError(f"config: [curate] dedup must be true or false, got {dedup!r}")
    curated = out / "curated"
    argv = ["curate", "--out", str(curated), "--quiet", *(["--dedup"] if dedup else [])]
    if cur.get("manifest"):
        argv += ["--manifest", path(cur["manifest"])]
    if cur.get("audio_dir"):
        argv += ["--audio-dir", path(cur["audio_dir"])]
    if cur.get("input"):
        argv.insert(1, path(cur["input"]))
    argv += curate_filter_args(cur)
    argv += [str(a) for a in cur.get("args", [])]
    if (curated / "parts").is_dir():
        argv.append("--resume")
    run_step("curate", argv)
    table = manifest.read_manifest(curated / "curated.parquet")
    passed = [bool(v) for v in table.column("passed").to_pylist()]
    keep = passed
    if keep_duplicates or not has_groups(table):
        why = "kept ([select] keep_duplicates)" if keep_duplicates else "not looked for"
        note = f"Duplicate recordings: {why}."
    else:
        keep = one_per_group(table, passed).tolist()
        note = (
            f"Duplicate recordings: {sum(passed) - sum(keep)} of the {sum(passed)} clips "
            "that passed curation removed (one clip per duplicate group kept)."
        )
    pool = out / "pool.parquet"
    manifest.write_manifest(table.filter(keep), pool)
    print(
        f"pool: {sum(keep)} of {table.num_rows} clips ({sum(passed)} passed); {note}",
        file=sys.stderr,
    )
    return pool, note


def _reference(
    cfg: dict[str, Any], ref: dict[str, Any], pool: Path, out: Path, ev: list[str]
) -> Path:
    """Steps 3 and 4: the reference model's answers on the pool, their
    errors, and the judges' category contributions."""
    ref_dir = out / "reference"
    run_step(
        "reference",
        ["query", *_model_args(ref, "[reference]"), "--manifest", str(pool), "--out", str(ref_dir),
         "--no-progress"],
        _GO_ON,
    )  # fmt: skip
    ref_pred = ref_dir / _output_name(ref["model"])
    run_step("reference-eval", ["evaluate", str(ref_pred), "--truth", str(pool), "--out",
                             str(out / "reference_eval"), *ev])  # fmt: skip
    argv = ["judge", str(ref_pred), "--manifest", str(pool), "--out", str(out / "judges"),
            "--no-progress"]  # fmt: skip
    for j in cfg.get("judges") or []:
        _model_args(j, "[[judges]]")  # checks provider and model
        url = f"@{j['base_url']}" if j.get("base_url") else ""
        argv += ["--judge", f"{j['provider']}:{j['model']}{url}"]
    argv += [str(a) for a in cfg.get("judge_args", [])]
    run_step("judges", argv, _GO_ON)
    return ref_pred


def _select(
    loc: dict[str, Any],
    sel: dict[str, Any],
    pool: Path,
    ref_pred: Path,
    out: Path,
    aliases: list[str],
) -> Path:
    """Step 5: fit the weights, score the pool, select the benchmark."""
    fit_dir = out / "localizability"
    argv = ["localizability", "fit", "--manifest", str(pool), "--reference", str(ref_pred),
            "--contributions", str(out / "judges" / "contributions.parquet"),
            "--judge-scores", str(out / "judges" / "judge_scores.parquet"),
            "--out", str(fit_dir), *aliases]  # fmt: skip
    for k in ("alpha", "gamma_km", "theta", "min_samples"):
        if k in loc:
            argv += [f"--{k.replace('_', '-')}", str(loc[k])]
    run_step("fit", argv)
    weights = fit_dir / "weights.json"
    scored = out / "scored.parquet"
    run_step("score", ["localizability", "score", "--weights", str(weights), "--manifest",
                    str(pool), "--out", str(scored)])  # fmt: skip
    bench = out / "benchmark.csv"
    argv = ["localizability", "select", "--manifest", str(scored), "--weights", str(weights),
            "--out", str(bench)]  # fmt: skip
    if sel.get("keep_duplicates") is True:
        argv.append("--keep-duplicates")
    for k in ("theta", "balance", "n", "speech_column", "speech_share", "counts", "screening"):
        if k in sel:
            v = sel[k]
            v = ",".join(str(x) for x in v) if isinstance(v, list) else str(v)
            argv += [f"--{k.replace('_', '-')}", v]
    run_step("select", argv)
    return bench


def _leaderboard(models: list[Any], bench: Path, out: Path, ev: dict[str, Any],
                 tail: list[str], note: str) -> None:  # fmt: skip
    """Step 6: the benchmark's models and their leaderboard."""
    runs = []
    for m in models:
        d = out / "runs" / _output_name(m.get("model", "model")).removesuffix(".parquet")
        run_step(f"model {m.get('model')}", ["query", *_model_args(m, "[[models]]"), "--manifest",
                                          str(bench), "--out", str(d), "--no-progress"],
              _GO_ON)  # fmt: skip
        runs.append(str(d / _output_name(m["model"])))
    if runs:
        argv = ["evaluate", *runs, "--truth", str(bench), "--out", str(out / "leaderboard"),
                "--note", note, *tail]  # fmt: skip
        if ev.get("mode"):
            argv += ["--mode", str(ev["mode"])]
        run_step("leaderboard", argv)


def build(config: str | Path) -> Path:
    """Run every step of ``config``; returns the output folder.

    Each step runs the ``agl-fast`` command a user would type (its options
    and defaults, so it resumes as that command does), with the paths of the
    previous steps' outputs; an error in a step ends the build with it.
    """
    cfg, here = _load(config)

    def path(v: Any) -> str:
        return str((here / str(v)).resolve())

    out = Path(path(cfg.get("out", "build")))
    out.mkdir(parents=True, exist_ok=True)
    cur = _section(cfg, "curate")
    ref = _section(cfg, "reference")
    judges = cfg.get("judges") or []
    if not isinstance(judges, list) or not judges:
        raise ParameterError("config: needs at least one [[judges]] entry")
    ev = _section(cfg, "evaluate", required=False)
    aliases = ["--aliases", path(ev["aliases"])] if ev.get("aliases") else []
    tail = ["--n-boot", str(int(ev.get("n_boot", 1000))), *aliases]
    loc = _section(cfg, "localizability", required=False)
    sel = _section(cfg, "select", required=False)
    keep = sel.get("keep_duplicates", False)
    if not isinstance(keep, bool):
        raise ParameterError(
            f"config: [select] keep_duplicates must be true or false, got {keep!r}"
        )
    pool, note = _curate(cur, out, path, keep)
    ref_pred = _reference(cfg, ref, pool, out, tail)
    bench = _select(loc, sel, pool, ref_pred, out, aliases)
    _leaderboard(cfg.get("models") or [], bench, out, ev, tail, note)
    return out


def run(args: argparse.Namespace) -> int:
    """Entry point of ``benchmark build``; typed errors exit 2 with one line."""
    try:
        out = build(args.config)
    except (AglError, OSError) as exc:
        print(f"agl-fast benchmark: {exc}", file=sys.stderr)
        return 2
    print(str(out))
    return 0
