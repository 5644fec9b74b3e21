"""``agl-fast spatial ask``: spatial questions to any audio-language model.

Each question of a dataset's ``qa.jsonl`` (simulated, :mod:`.dataset`, or
read from a released one, :mod:`.readers`) is sent with its scene's binaural
mixture, as a two-channel 16-bit WAV, through the query harness of
:mod:`agl_fast.alm` (OpenAI-compatible, Gemini, vLLM, ...; rate limits,
retries, the SQLite cache, so an interrupted run resumes). The prompt is
:data:`PREAMBLE` followed by the question. ``--model owl:PATH`` asks a local
OWL model (:mod:`agl_fast.owl.model`, its own instruction template) instead
of a provider. The answers are read with
:mod:`.answers` and scored with OWL's metrics (:func:`.answers.score_qa`).

Outputs, under ``--out``: ``results.sqlite`` (the harness's store),
``audio/<scene>.wav`` (the clips sent), ``answers.parquet`` (one row per
question: ``key``, ``scene``, ``type``, ``kind``, ``n_sources``,
``question``, ``reference``, ``model_output``, ``answer_class``,
``error``) and ``scores.json`` (the metrics; a failed request counts as a
wrong answer, and ``n_failed`` says how many there were).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["PREAMBLE", "PROMPT_ID", "add_parser", "ask"]

PROMPT_ID = "owl-spatial/v1"
OWL_PREFIX = "owl:"
OWL_PROMPT_ID = "owl-instruction/v1"  # agl_fast.owl.model.PROMPT_TEMPLATE
PREAMBLE = (
    "You are listening to a binaural recording: the first channel is the left ear, the second "
    "the right ear. Answer the question about the sounds. Give directions as clock positions "
    "in words (twelve o'clock is straight ahead, three o'clock to your right, six o'clock "
    "behind, nine o'clock to your left), elevation as up or down, and distances in metres.\n\n"
    "Question: "
)


def _write_clips(root: Path, scenes: list[str], out: Path) -> dict[str, Path]:
    import soundfile as sf

    from ..spatial.dataset import load_scenes

    meta = {}
    for line in (root / "scenes.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        meta[r["id"]] = int(r.get("sr", 32000))
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    todo = [s for s in scenes if not (out / f"{s}.wav").is_file()]
    for sid, arrays in zip(todo, load_scenes(root, todo) if todo else [], strict=True):
        y = np.asarray(arrays["audio"], dtype=np.float32)
        peak = float(np.max(np.abs(y))) if y.size else 0.0
        y = y / peak * 0.99 if peak > 0.99 else y  # keep 16-bit PCM from clipping
        sf.write(str(out / f"{sid}.wav"), y.T, meta.get(sid, 32000), subtype="PCM_16")
    for s in scenes:
        paths[s] = out / f"{s}.wav"
    return paths


def _answers_table(
    keys: list[str],
    rows: list[dict[str, Any]],
    texts: list[str],
    classes: list[str],
    got: list[Any],
) -> Any:
    """``answers.parquet``: one row per question with the model's answer."""
    import pyarrow as pa

    return pa.table({
        "key": keys,
        "scene": [r["scene"] for r in rows],
        "type": [r["type"] for r in rows],
        "kind": [r.get("kind") for r in rows],
        "n_sources": pa.array([int(r.get("n_sources", 1)) for r in rows], pa.int32()),
        "question": [r["question"] for r in rows],
        "reference": [r["answer"] for r in rows],
        "model_output": texts,
        "answer_class": classes,
        "error": [(g or {}).get("error") for g in got],
    })  # fmt: skip


def ask(args: argparse.Namespace) -> int:
    """Run the questions (see the module docs); returns the exit status."""
    import pyarrow.parquet as pq

    from ..alm import cost
    from ..alm.audio import file_hash
    from ..alm.keys import resolve_key
    from ..alm.options import exit_status, limits, request_params, sampling_free
    from ..alm.protocol import Reply
    from ..alm.providers import CAPABILITIES, make_provider
    from ..alm.runner import AudioOptions, Engine, Job
    from ..exceptions import ParameterError
    from ..remote.store import Store, cache_key
    from ..spatial.answers import score_qa
    from ..spatial.dataset import read_qa

    rows = read_qa(args.data, split=args.split, types=args.types)
    if args.limit is not None:
        rows = rows[: args.limit]
    if not rows:
        raise ParameterError(
            f"no question in {args.data} for split={args.split} types={args.types}"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if str(args.model).startswith(OWL_PREFIX):
        return _ask_owl(args, rows, out)
    if args.provider is None:
        raise ParameterError("--provider is required (except with --model owl:PATH)")
    caps = CAPABILITIES[args.provider]
    params = request_params(args)
    extra = sampling_free(params)
    audio = AudioOptions(format="wav", sample_rate=args.sample_rate or None,
                         max_seconds=caps.max_seconds,
                         max_bytes=caps.file_api_bytes or caps.max_request_bytes,
                         mono=False)  # fmt: skip
    clips = _write_clips(Path(args.data), sorted({r["scene"] for r in rows}), out / "audio")
    hashes = {s: file_hash(p) for s, p in clips.items()}
    ident = {**params, "audio": [audio.format, audio.sample_rate, "binaural"]}
    preamble_hash = hashlib.sha256(PREAMBLE.encode("utf-8")).hexdigest()
    jobs, keys = [], []
    for i, r in enumerate(rows):
        prompt = PREAMBLE + r["question"]
        ph = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        job_key = f"{r['scene']}-{i:06d}"
        keys.append(job_key)
        jobs.append(Job(key=job_key, cache_key=cache_key(args.provider, args.model, ph,
                                                     hashes[r["scene"]], ident),
                        prompt=prompt, input_hash=hashes[r["scene"]],
                        audio_path=clips[r["scene"]], audio_seconds=10.0))  # fmt: skip
    api_key = resolve_key(args.provider, required=args.provider != "vllm")
    provider = make_provider(args.provider, api_key, base_url=args.base_url, timeout=args.timeout,
                             extra=extra)  # fmt: skip
    price = cost.lookup(args.model, args.provider, cost.load_prices(args.prices))

    def classify(reply: Reply) -> str:
        return "ok" if (reply.text or "").strip() else "blocked"

    with Store(out / "results.sqlite") as store:
        engine = Engine(provider, args.model, store, params, PROMPT_ID, preamble_hash, classify,
                        price=price, limits=limits(args), audio=audio, max_cost=args.max_cost,
                        rerun_failed=args.rerun_failed, progress=not args.no_progress)  # fmt: skip
        summary = engine.run(jobs)
        got = [store.get(j.cache_key) for j in jobs]
    texts = [(g or {}).get("raw_text") or "" for g in got]
    classes = [(g or {}).get("answer_class") or "not_started" for g in got]
    table = _answers_table(keys, rows, texts, classes, got)
    pq.write_table(table, str(out / "answers.parquet"))
    scores = score_qa(rows, texts, **_type1_options(args, out))
    scores["n_failed"] = sum(c not in ("ok", "blocked") for c in classes)
    scores.update(provider=args.provider, model=args.model, prompt_id=PROMPT_ID)
    (out / "scores.json").write_text(json.dumps(scores, indent=1, default=str), encoding="utf-8")
    print(json.dumps({k: v for k, v in scores.items() if k not in ("provider", "prompt_id")},
                     default=str))  # fmt: skip
    return exit_status(summary)


def _ask_owl(args: argparse.Namespace, rows: list[dict[str, Any]], out: Path) -> int:
    """The questions to a local OWL model (``--model owl:PATH``), same outputs."""
    import pyarrow.parquet as pq

    from ..owl.cli import SpatialQaSource
    from ..owl.infer import generate_answers
    from ..owl.model import load_owl
    from ..spatial.answers import score_qa

    path = str(args.model)[len(OWL_PREFIX) :]
    model, tokenizer = load_owl(path)
    source = SpatialQaSource(args.data, args.split)
    texts = generate_answers(model, tokenizer, source, rows, batch_size=args.owl_batch_size)
    keys = [f"{r['scene']}-{i:06d}" for i, r in enumerate(rows)]
    classes = ["ok" if t.strip() else "blocked" for t in texts]
    pq.write_table(_answers_table(keys, rows, texts, classes, [None] * len(rows)),
                   str(out / "answers.parquet"))  # fmt: skip
    scores = score_qa(rows, texts)
    scores.update(n_failed=0, provider="owl", model=args.model, prompt_id=OWL_PROMPT_ID)
    (out / "scores.json").write_text(json.dumps(scores, indent=1, default=str), encoding="utf-8")
    print(json.dumps({k: v for k, v in scores.items() if k not in ("provider", "prompt_id")},
                     default=str))  # fmt: skip
    return 0


def _type1_options(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """``score_qa``'s Type I options: OWL's embedding protocol (``--type1
    embedding``: the vocabulary of ``--class-labels``, embeddings through the
    harness into the run's store) or the 0/1 match."""
    import functools

    from ..alm.embeddings import fetch_embeddings
    from ..alm.keys import resolve_key
    from ..exceptions import ParameterError
    from ..spatial.embeddings import read_class_labels

    if args.type1 == "match":
        return {"type1": "match"}
    if args.class_labels is None:
        raise ParameterError("--type1 embedding needs --class-labels (a class_labels_indices CSV)")
    prov = args.embedding_provider
    embed = functools.partial(
        fetch_embeddings, model=args.embedding_model, store=out / "results.sqlite", provider=prov,
        base_url=args.embedding_base_url, key=resolve_key(prov, required=prov != "vllm"),
        progress=not args.no_progress,
    )  # fmt: skip
    return {"type1": "embedding", "vocabulary": read_class_labels(args.class_labels),
            "embed": embed}  # fmt: skip


def add_parser(ssub: Any) -> None:
    """Register ``spatial ask``."""
    from ..alm.options import PROVIDERS, add_request_options

    p = ssub.add_parser(
        "ask",
        help="ask an audio-language model the spatial questions of a dataset and score them",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--data", type=Path, required=True, help="dataset with qa.jsonl")
    p.add_argument("--provider", default=None, choices=PROVIDERS,
                   help="required, except for a local OWL model")  # fmt: skip
    p.add_argument("--model", required=True,
                   help="the provider's model name, or owl:PATH (a local OWL model "
                   "directory, asked with OWL's own prompt template)")  # fmt: skip
    p.add_argument("--owl-batch-size", type=int, default=8,
                   help="questions per generation batch (owl:PATH)")  # fmt: skip
    p.add_argument("--split", default="test", help="split asked about (all: --split '')")
    p.add_argument("--types", nargs="*", default=None, choices=("I", "II", "III", "IV"),
                   help="question types (default: all)")  # fmt: skip
    p.add_argument("--sample-rate", type=int, default=32000, help="0 keeps the file's rate")
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument("--type1", default="match", choices=("match", "embedding"),
                   help="Type I protocol: 0/1 match of the scene's event names, or OWL's "
                   "embedding similarity over --class-labels")  # fmt: skip
    p.add_argument("--class-labels", type=Path, default=None,
                   help="class vocabulary CSV (index,mid,display_name; OWL: SpatialSoundQA's "
                   "class_labels_indices_subset.csv, 355 classes)")  # fmt: skip
    p.add_argument("--embedding-model", default="text-embedding-ada-002")
    p.add_argument("--embedding-provider", default="openai", choices=PROVIDERS)
    p.add_argument("--embedding-base-url", default=None,
                   help="base URL (.../v1) of an OpenAI-style embeddings endpoint")  # fmt: skip
    add_request_options(p)
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from ..exceptions import AglError

    if args.split == "":
        args.split = None
    try:
        return ask(args)
    except AglError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
