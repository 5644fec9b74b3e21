"""``agl-fast benchmark demo``: the selection method offline, on a shipped pool.

The package ships a pool of 48 clips (``data/demo_pool.csv``: places and
AudioSet group fractions, the layout of the released AGL1K CSV). The demo
writes a short tone per clip, starts loopback model servers in this process
(:mod:`.demo_servers`: a reference model and two judges, deterministic), and
runs the package's own commands on them, as a user would::

    query        the reference model on the pool    -> reference/
    judge        two judges score its reasoning      -> judges/
    fit          localizability fit                  -> localizability/weights.json
    score        localizability score                -> scored.parquet
    select       localizability select (a mix)       -> benchmark.csv

Nothing is downloaded and no key is needed. The judges score each category
``weight x fraction``, so the fitted weights are the servers' weights times
the judges' mean scale (printed beside them at the end).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import wave
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from ..exceptions import AglError, ParameterError

__all__ = ["DEMO_THETA", "JUDGE_SCALES", "add_demo_parser", "run_demo", "write_pool"]

#: The demo judges and the scale each applies to the shared weights.
JUDGE_SCALES: dict[str, float] = {"demo-judge-a": 1.0, "demo-judge-b": 0.8}
REFERENCE = "demo-reference"
#: Sample rate and length of the tones written for the pool.
_SR, _SECONDS = 16000, 1.0
#: Columns a demo pool must have (besides its group fractions).
_POOL_COLUMNS = ("key", "latitude", "longitude", "city", "country", "continent", "mp3name")
#: Clips behind a weight in the demo's fit (the pool is small).
_MIN_SAMPLES = 3
#: The demo's localizability threshold: the paper's 1 leaves this small pool
#: no non-speech clip (``--theta 1`` shows the report of a side that falls short).
DEMO_THETA = 0.5


def add_demo_parser(sub: Any) -> None:
    """Register ``benchmark demo``."""
    d = sub.add_parser(
        "demo",
        help="fit -> score -> select offline, on a shipped pool, against loopback model servers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("--out", default="agl-fast-demo", help="output folder (default: %(default)s)")
    d.add_argument(
        "--pool",
        default=None,
        help="a pool CSV of the same layout (key, places, mp3name, group fractions) "
        "instead of the shipped one",
    )
    d.add_argument(
        "--speech-share",
        type=float,
        default=0.71,
        help="speech share of the selection (default: %(default)s, the paper's)",
    )
    d.add_argument(
        "--theta",
        type=float,
        default=DEMO_THETA,
        help="localizability threshold (default: %(default)s; the paper's is 1)",
    )
    d.set_defaults(run=run_demo)


def _tone(path: Path, index: int) -> None:
    """One second of a tone whose pitch is the clip's own (so every file differs)."""
    n = int(_SR * _SECONDS)
    freq = 180.0 + 23.0 * index
    frames = bytearray()
    for i in range(n):
        v = int(9000 * math.sin(2 * math.pi * freq * i / _SR))
        frames += v.to_bytes(2, "little", signed=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(_SR)
        w.writeframes(bytes(frames))


def write_pool(out: Path, source: str | Path | None = None) -> tuple[Path, Path]:
    """Copy the pool (``source``, else the shipped one) to ``out/pool.csv`` and
    write a tone per clip under ``out/audio``; returns ``(pool_csv, audio_dir)``."""
    if source is None:
        text = resources.files(__package__).joinpath("data/demo_pool.csv").read_text("utf-8")
    else:
        text = Path(source).read_text(encoding="utf-8")
    pool = out / "pool.csv"
    pool.write_text(text, encoding="utf-8")
    audio = out / "audio"
    audio.mkdir(exist_ok=True)
    import csv

    with pool.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in _POOL_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ParameterError(f"{source}: a demo pool needs the columns {missing}")
        for i, row in enumerate(reader):
            name = row["mp3name"] or ""
            if not name or Path(name).name != name:
                raise ParameterError(f"{source}: mp3name must be a plain file name, got {name!r}")
            _tone(audio / name, i)
    return pool, audio


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    """No proxy for the loopback servers while the demo runs."""
    saved = {k: os.environ.get(k) for k in ("NO_PROXY", "no_proxy")}
    extra = "127.0.0.1,localhost"
    for k, v in saved.items():
        os.environ[k] = f"{v},{extra}" if v else extra
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _servers(pool: Path, audio: Path) -> list[Any]:
    """The reference model and the judges (not started)."""
    import csv

    from .. import manifest
    from .demo_servers import LoopbackModel, audio_digest, judge_answer, reference_answer

    groups = tuple(g for g in manifest.GROUP_COLUMNS if g != "channel")
    with pool.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    by_audio = {audio_digest((audio / r["mp3name"]).read_bytes()): r for r in rows}

    def reference(text: str, data: bytes | None) -> str:
        row = by_audio.get(audio_digest(data)) if data is not None else None
        return reference_answer(row, groups) if row else "I cannot hear any audio."

    def judge(scale: float) -> Callable[[str, bytes | None], str]:
        def answer(text: str, data: bytes | None) -> str:
            return judge_answer(text, scale)

        return answer

    judges = [LoopbackModel(name, judge(scale)) for name, scale in JUDGE_SCALES.items()]
    return [LoopbackModel(REFERENCE, reference), *judges]


def _steps(
    out: Path, pool: Path, audio: Path, servers: list[Any], args: argparse.Namespace
) -> Path:
    """Run query, judge, fit, score and select; returns the benchmark file."""
    from ..alm.query import output_name
    from .steps import run_step

    ref, *judges = servers
    ref_dir, jdir, fit_dir = out / "reference", out / "judges", out / "localizability"
    run_step("reference", ["query", "--provider", "vllm", "--model", REFERENCE, "--base-url",
                        ref.base_url, "--manifest", str(pool), "--audio-dir", str(audio),
                        "--out", str(ref_dir), "--no-progress"])  # fmt: skip
    ref_pred = ref_dir / output_name(REFERENCE)
    argv = ["judge", str(ref_pred), "--manifest", str(pool), "--out", str(jdir), "--no-progress"]
    for j in judges:
        argv += ["--judge", f"vllm:{j.name}@{j.base_url}"]
    run_step("judges", argv)
    run_step("fit", ["localizability", "fit", "--manifest", str(pool), "--reference", str(ref_pred),
                  "--contributions", str(jdir / "contributions.parquet"), "--judge-scores",
                  str(jdir / "judge_scores.parquet"), "--min-samples", str(_MIN_SAMPLES),
                  "--theta", str(args.theta), "--out", str(fit_dir)])  # fmt: skip
    scored, bench = out / "scored.parquet", out / "benchmark.csv"
    weights = fit_dir / "weights.json"
    run_step("score", ["localizability", "score", "--weights", str(weights), "--manifest",
                       str(pool), "--out", str(scored)])  # fmt: skip
    run_step("select", ["localizability", "select", "--manifest", str(scored), "--weights",
                     str(weights), "--speech-share", str(args.speech_share),
                     "--audio-dir", str(audio), "--out", str(bench)])  # fmt: skip
    return bench


def _summary(out: Path, bench: Path) -> dict[str, Any]:
    """What the demo found: the fitted weights beside the servers', and the selection."""
    from .. import manifest
    from .demo_servers import SURE_WEIGHTS, UNSURE_WEIGHTS
    from .fit import LocalizabilityWeights

    w = LocalizabilityWeights.load(out / "localizability" / "weights.json")
    scale = sum(JUDGE_SCALES.values()) / len(JUDGE_SCALES)
    table = manifest.read_manifest(bench)
    speech = [bool(v) for v in manifest.speech_mask(table)]
    return {
        "out": str(out),
        "judge_scale": scale,
        "weights": {
            c: {
                "a": a,
                "abar": ab,
                "server_a": SURE_WEIGHTS.get(c, 0.0) * scale,
                "server_abar": UNSURE_WEIGHTS.get(c, 0.0) * scale,
            }
            for c, a, ab in zip(w.categories, w.a, w.abar, strict=True)
        },
        "positive": list(w.positive),
        "negative": list(w.negative),
        "benchmark": str(bench),
        "selected": table.num_rows,
        "speech": sum(speech),
        "nonspeech": len(speech) - sum(speech),
    }


def run_demo(args: argparse.Namespace) -> int:
    """Entry point of ``benchmark demo``; prints a JSON summary on stdout."""
    out = Path(args.out).resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
        pool, audio = write_pool(out, args.pool)
        servers = _servers(pool, audio)
        with _loopback_only(), contextlib.ExitStack() as stack:
            for s in servers:
                stack.enter_context(s)
            print(f"loopback models: {', '.join(s.base_url for s in servers)}", file=sys.stderr)
            # the steps' own reports go to stderr: stdout is the summary alone
            with contextlib.redirect_stdout(sys.stderr):
                bench = _steps(out, pool, audio, servers, args)
        summary = _summary(out, bench)
    except (AglError, OSError) as exc:
        print(f"agl-fast benchmark demo: {exc}", file=sys.stderr)
        return 2
    (out / "demo.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 0
