"""``agl-fast query``: the command line of the query harness (its options
in :mod:`agl_fast.alm.options`; exit status there too)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import manifest
from .options import (
    PROTOCOLS,
    PROVIDERS,
    add_request_options,
    exit_status,
    limits,
    request_params,
    sampling_free,
)
from .prompts import DEFAULT_PROMPT

__all__ = ["PROTOCOLS", "PROVIDERS", "add_query_parser", "run_query"]


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
        "--audio-dir", default=None,
        help="folder of the clips: {key}.mp3 (the agl1k fetch layout) first, then the "
        "manifest's relative paths (default: the manifest's folder)",
    )  # fmt: skip
    q.add_argument("--strict", action="store_true", help=manifest.STRICT_AUDIO_HELP)
    q.add_argument(
        "--protocol", choices=PROTOCOLS, default="prepared",
        help="agl1k: the original file as sent by the AGL1K reference code (base64 input_audio, "
        "its own format, no sampling parameters); prepared: decoded, mono, resampled, "
        "re-encoded (--audio-format, --sample-rate) with the sampling parameters given",
    )  # fmt: skip
    q.add_argument(
        "--prompt", default=DEFAULT_PROMPT,
        help="template id or name (agl1k-reference: the prompt the AGL1K reference code sends; "
        "agl1k-typeset: the paper's typeset appendix B.9.1) or @FILE",
    )  # fmt: skip
    q.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                   help="stream answers (None: the provider's usual mode)")  # fmt: skip
    q.add_argument("--json-schema", action="store_true", help="ask for schema-constrained JSON")
    q.add_argument("--audio-format", choices=("wav", "flac"), default="wav",
                   help="encoding of the audio sent")  # fmt: skip
    q.add_argument("--sample-rate", type=int, default=16000, help="0 keeps the file's rate")
    q.add_argument("--max-seconds", type=float, default=None, help="truncate clips (recorded)")
    q.add_argument("--limit", type=int, default=None, help="first N clips only")
    q.add_argument("--dry-run", action="store_true", help="print the estimate and stop")
    add_request_options(q)
    q.set_defaults(run=run_query)
    return q


def _audio_options(args: argparse.Namespace, caps: Any, max_seconds: Any, agl1k: bool) -> Any:
    """How clips are sent: the provider's limits, the flags, and for the
    AGL1K protocol the original file untouched."""
    from .runner import AudioOptions

    return AudioOptions(
        format=args.audio_format,
        sample_rate=args.sample_rate or None,
        max_seconds=None if agl1k else max_seconds,
        max_bytes=caps.file_api_bytes or caps.max_request_bytes,
        passthrough=agl1k,
    )


def _clips(args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    """The manifest's clips with audio (at most ``--limit``) and those without."""
    from ..exceptions import ParameterError
    from . import query

    audio_dir = args.audio_dir if args.audio_dir is not None else Path(args.manifest).parent
    clips, missing = query.read_manifest(args.manifest, audio_dir, strict=args.strict)
    if args.limit is not None:
        clips = clips[: args.limit]
    if not clips:
        raise ParameterError(f"no clip of {args.manifest} has its audio in {audio_dir}")
    return clips, missing


def run_query(args: argparse.Namespace) -> int:
    """Execute ``query``; returns the exit status (:mod:`.options`)."""
    from ..exceptions import ParameterError
    from . import cost, query
    from .keys import redact, resolve_key
    from .prompts import get_template
    from .providers import CAPABILITIES, make_provider
    from .runner import Engine

    caps = CAPABILITIES[args.provider]
    tmpl = get_template(args.prompt)
    params = request_params(args)
    extra = sampling_free(params)
    agl1k = args.protocol == "agl1k"
    if agl1k:
        # The AGL1K reference code sends no sampling parameter at all.
        params = dict(extra)
        if args.max_seconds is not None:
            raise ParameterError("--protocol agl1k sends whole files; drop --max-seconds")
    max_seconds = args.max_seconds if args.max_seconds is not None else caps.max_seconds
    audio = _audio_options(args, caps, max_seconds, agl1k)
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
    clips, missing = _clips(args)
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
            price=price, limits=limits(args), audio=audio, max_cost=args.max_cost,
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
    run_info = {
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
    }
    query.write_run_info(out / "run.json", run_info, secrets=(key,))
    return exit_status(summary, n_errors)
