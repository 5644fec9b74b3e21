"""``agl-fast query`` and ``agl-fast judge``.

Exit status: 0 all answered, 1 some items failed, 3 stopped by ``--max-cost``,
4 stopped by an authentication failure (partial results saved in every case).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# Kept free of heavy imports (httpx, numpy): they load in the run functions.
from .ratelimit import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_RETRY_WAIT

PROVIDERS = ("openai", "openrouter", "gemini", "dashscope", "vllm")
PROTOCOLS = ("prepared", "agl1k")
_SAMPLING = ("temperature", "top_p", "max_tokens", "seed")
EXIT_FAILED, EXIT_BUDGET, EXIT_AUTH = 1, 3, 4


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="output directory (store, Parquet, run.json)")
    p.add_argument("--base-url", default=None, help="API base URL (default: the provider's)")
    p.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    p.add_argument("--rpm", type=float, default=None, help="requests per minute limit")
    p.add_argument("--tpm", type=float, default=None, help="tokens per minute limit")
    p.add_argument("--max-cost", type=float, default=None, help="stop before spending more (USD)")
    p.add_argument("--prices", default=None, help="JSON price table overriding the defaults")
    p.add_argument(
        "--timeout", type=float, default=120.0,
        help="seconds for a whole request: connect, headers and the full body",
    )  # fmt: skip
    p.add_argument(
        "--max-retry-wait", type=float, default=DEFAULT_MAX_RETRY_WAIT,
        help="longest wait before a retry (s); a server asking for more makes the item "
        "a RateLimited error",
    )  # fmt: skip
    p.add_argument(
        "--max-response-bytes", type=int, default=DEFAULT_MAX_RESPONSE_BYTES,
        help="largest response body read; a larger one is a ResponseTooLarge error",
    )  # fmt: skip
    p.add_argument("--max-attempts", type=int, default=6, help="tries per request")
    p.add_argument("--backoff-base", type=float, default=1.0, help="first backoff step (s)")
    p.add_argument(
        "--breaker-threshold", type=int, default=8, help="failures in a row that open the breaker"
    )
    p.add_argument(
        "--breaker-cooldown", type=float, default=30.0, help="seconds the breaker stays open"
    )
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature")
    p.add_argument("--top-p", type=float, default=None, help="nucleus sampling")
    p.add_argument("--max-tokens", type=int, default=None, help="answer length limit")
    p.add_argument("--seed", type=int, default=42, help="sampling seed sent to the model")
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=JSON",
        help="extra request field, e.g. enable_thinking=false (recorded)",
    )  # fmt: skip
    p.add_argument("--rerun-failed", action="store_true", help="send failed items again")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (also -q)")


def add_query_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``query``."""
    q: argparse.ArgumentParser = subparsers.add_parser(
        "query", help="query an audio-language model over a manifest (resumable)"
    )
    q.add_argument("--provider", required=True, choices=PROVIDERS, help="API family")
    q.add_argument("--model", required=True, help="model name at the provider")
    q.add_argument(
        "--manifest", required=True,
        help="clip table, CSV or Parquet, with a key and a path column (AGL1K CSV, curate output)",
    )  # fmt: skip
    q.add_argument(
        "--audio-dir", default=None, help="folder of relative paths (default: the manifest's)"
    )
    q.add_argument(
        "--protocol", choices=PROTOCOLS, default="prepared",
        help="agl1k: the original file as sent by the AGL1K reference code (base64 input_audio, "
        "its own format, no sampling parameters); prepared: decoded, mono, resampled, "
        "re-encoded (--audio-format, --sample-rate) with the sampling parameters given",
    )  # fmt: skip
    q.add_argument("--prompt", default="agl1k-benchmark/v1", help="template id or @FILE")
    q.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                   help="stream answers (None: the provider's usual mode)")  # fmt: skip
    q.add_argument("--json-schema", action="store_true", help="ask for schema-constrained JSON")
    q.add_argument("--audio-format", choices=("wav", "flac"), default="wav",
                   help="encoding of the audio sent")  # fmt: skip
    q.add_argument("--sample-rate", type=int, default=16000, help="0 keeps the file's rate")
    q.add_argument("--max-seconds", type=float, default=None, help="truncate clips (recorded)")
    q.add_argument("--limit", type=int, default=None, help="first N clips only")
    q.add_argument("--dry-run", action="store_true", help="print the estimate and stop")
    _common(q)
    q.set_defaults(run=run_query)
    return q


def add_judge_parser(subparsers: Any) -> argparse.ArgumentParser:
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
    _common(j)
    j.set_defaults(run=run_judge)
    return j


def _params(args: argparse.Namespace) -> dict[str, Any]:
    from ..exceptions import ParameterError

    params: dict[str, Any] = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "seed": args.seed,
    }
    for kv in args.param:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise ParameterError(f"--param must be KEY=JSON, got {kv!r}")
        try:
            params[k] = json.loads(v)
        except ValueError:
            params[k] = v
    return params


def _limits(args: argparse.Namespace) -> Any:
    from ..exceptions import ParameterError
    from .runner import Limits

    if not args.timeout > 0 or args.timeout == float("inf"):
        raise ParameterError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if not args.max_retry_wait >= 0 or args.max_retry_wait == float("inf"):
        raise ParameterError(f"--max-retry-wait must be >= 0 s, got {args.max_retry_wait}")
    if args.max_response_bytes < 1:
        raise ParameterError(f"--max-response-bytes must be >= 1, got {args.max_response_bytes}")
    return Limits(
        concurrency=args.concurrency,
        rpm=args.rpm,
        tpm=args.tpm,
        max_attempts=args.max_attempts,
        backoff_base=args.backoff_base,
        breaker_threshold=args.breaker_threshold,
        breaker_cooldown=args.breaker_cooldown,
        max_retry_wait=args.max_retry_wait,
        max_response_bytes=args.max_response_bytes,
    )


def _exit(summary: Any, n_errors: int | None = None) -> int:
    if summary.stopped == "budget":
        print("stopped: --max-cost reached; partial results saved", file=sys.stderr)
        return EXIT_BUDGET
    if summary.stopped == "auth":
        print("stopped: authentication failed (check the API key)", file=sys.stderr)
        return EXIT_AUTH
    failed = summary.n_failed if n_errors is None else n_errors
    return EXIT_FAILED if failed else 0


def run_query(args: argparse.Namespace) -> int:
    from ..exceptions import ParameterError
    from . import cost, query
    from .keys import redact, resolve_key
    from .prompts import get_template
    from .providers import CAPABILITIES, make_provider
    from .runner import AudioOptions, Engine

    caps = CAPABILITIES[args.provider]
    tmpl = get_template(args.prompt)
    params = _params(args)
    extra = {k: v for k, v in params.items() if k not in _SAMPLING}
    agl1k = args.protocol == "agl1k"
    if agl1k:
        # The AGL1K reference code sends no sampling parameter at all.
        params = dict(extra)
        if args.max_seconds is not None:
            raise ParameterError("--protocol agl1k sends whole files; drop --max-seconds")
    max_seconds = args.max_seconds if args.max_seconds is not None else caps.max_seconds
    audio = AudioOptions(
        format=args.audio_format,
        sample_rate=args.sample_rate or None,
        max_seconds=None if agl1k else max_seconds,
        max_bytes=caps.file_api_bytes or caps.max_request_bytes,
        passthrough=agl1k,
    )
    sent = ["original"] if agl1k else [audio.format, audio.sample_rate, audio.max_seconds]
    ident = {**params, "audio": sent, "protocol": args.protocol,
             "json_schema": bool(args.json_schema and caps.json_schema)}  # fmt: skip
    price = cost.lookup(args.model, args.provider, cost.load_prices(args.prices))
    if args.max_cost is not None and price is None:
        raise ParameterError(
            f"--max-cost needs a price for model {args.model!r}; add it with --prices FILE"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    audio_dir = args.audio_dir if args.audio_dir is not None else Path(args.manifest).parent
    clips, missing = query.read_manifest(args.manifest, audio_dir)
    if args.limit is not None:
        clips = clips[: args.limit]
    if not clips:
        raise ParameterError(f"no clip of {args.manifest} has its audio in {audio_dir}")
    jobs = query.build_jobs(
        clips, args.provider, args.model, tmpl.text, tmpl.sha256, ident,
        (price.audio_tokens_per_second if price and price.audio_tokens_per_second
         else caps.audio_tokens_per_second),
        None if agl1k else max_seconds,
    )  # fmt: skip
    key = resolve_key(args.provider, required=args.provider != "vllm")
    provider = make_provider(
        args.provider, key, base_url=args.base_url, timeout=args.timeout, stream=args.stream,
        json_schema=args.json_schema, extra=extra,
    )  # fmt: skip
    with query.open_store(out) as store:
        engine = Engine(
            provider, args.model, store, params, tmpl.id, tmpl.sha256, query.answer_class,
            price=price, limits=_limits(args), audio=audio, max_cost=args.max_cost,
            rerun_failed=args.rerun_failed, progress=not args.no_progress,
        )  # fmt: skip
        todo = [j for j in jobs if not store.is_done(j.cache_key, args.rerun_failed)]
        est = [engine.estimate_cost(j) for j in todo]
        est_cost = None if price is None else sum(e or 0.0 for e in est)
        print(
            f"{len(jobs)} clips ({len(missing)} without audio skipped), {len(todo)} to send, "
            f"{sum(j.audio_seconds for j in todo):.0f} s of audio, estimated cost "
            + ("unknown (no price)" if est_cost is None else f"<= ${est_cost:.4f}"),
            file=sys.stderr,
        )
        if args.dry_run:
            return 0
        summary = engine.run(jobs)
        path = out / query.output_name(args.model)
        tbl = query.export(engine, jobs, path)
        n_errors = tbl.column("answer_class").to_pylist().count("error")
    query.write_run_info(
        out / "run.json",
        {
            "provider": args.provider,
            "model": args.model,
            "base_url": redact(provider.base_url, key),
            "prompt_id": tmpl.id,
            "prompt_hash": tmpl.sha256,
            "protocol": args.protocol,
            "params": params,
            "audio": vars(audio),
            "n_missing_audio": len(missing),
            "summary": vars(summary),
            "output": path.name,
        },
        secrets=(key,),
    )
    return _exit(summary, n_errors)


def run_judge(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..evaluate.parse import parse_answer
    from ..evaluate.readers import read_predictions
    from ..exceptions import ParameterError
    from . import cost, judges
    from .keys import resolve_key
    from .prompts import contribution_prompt, get_template
    from .providers import make_provider
    from .runner import Engine, Job
    from .store import Store, cache_key

    tmpl = get_template(args.prompt)
    params = _params(args)
    extra = {
        k: v for k, v in params.items() if k not in ("temperature", "top_p", "max_tokens", "seed")
    }
    reasoning: dict[str, str] = {}
    for path in args.pred:
        df, _ = read_predictions(path)
        for _, r in df.iterrows():
            text = r.get("reason") if "reason" in df.columns else None
            if not isinstance(text, str) or not text.strip():
                text = parse_answer(r.get("model_output")).reason or r.get("model_output")
            if isinstance(text, str) and text.strip():
                reasoning.setdefault(str(r["question_id"]), text.strip())
    cats: dict[str, list[str]] = {}
    if args.manifest:
        from .. import manifest
        from ..localizability.tables import clip_categories

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
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = cost.load_prices(args.prices)
    per_judge: dict[str, dict[str, dict[str, float] | None]] = {}
    raw: dict[str, list[Any]] = {f.name: [] for f in judges.SCORES_SCHEMA}
    code = 0
    with Store(out / "judges.sqlite") as store:
        for spec in args.judge:
            name, at, url = spec.partition("@")
            prov, sep, model = name.partition(":")
            if not sep or not model or (at and not url):
                raise ParameterError(f"--judge must be PROVIDER:MODEL[@BASE_URL], got {spec!r}")
            provider = make_provider(
                prov, resolve_key(prov, required=prov != "vllm"), base_url=url or args.base_url,
                timeout=args.timeout, extra=extra,
            )  # fmt: skip
            price = cost.lookup(model, prov, table)
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
                price=price, limits=_limits(args), max_cost=args.max_cost,
                rerun_failed=args.rerun_failed, progress=not args.no_progress,
            )  # fmt: skip
            summary = engine.run(jobs)
            code = max(code, _exit(summary))
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
            per_judge[spec] = scores
    pq.write_table(judges.aggregate(per_judge, cats), str(out / "contributions.parquet"))
    pq.write_table(pa.Table.from_pydict(raw, schema=judges.SCORES_SCHEMA),
                   str(out / "judge_scores.parquet"))  # fmt: skip
    return code
