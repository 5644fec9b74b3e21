"""``agl-fast query``: the command line of the query harness (its options
in :mod:`agl_fast.alm.options`; exit status there too)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from .. import manifest
from .options import (
    IN_PROCESS,
    PROTOCOLS,
    add_request_options,
    exit_status,
    limits,
    request_params,
    sampling_free,
)
from .options import ROUTES as PROVIDERS  # query also reaches in-process models
from .prompts import DEFAULT_PROMPT

__all__ = ["PROTOCOLS", "PROVIDERS", "add_query_parser", "run_query"]

_log = logging.getLogger("agl_fast.alm")


def add_query_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``query``."""
    q: argparse.ArgumentParser = subparsers.add_parser(
        "query", help="query an audio-language model over a manifest (resumable)"
    )
    q.add_argument(
        "--provider", default=None, choices=PROVIDERS,
        help="API family, vllm (an OpenAI-compatible server) or transformers (in-process); "
        "default: the route of a registry --model",
    )  # fmt: skip
    q.add_argument(
        "--model", required=True,
        help="model id at the provider, or a registry name (agl-fast models list): its route, "
        "model id and generation settings apply unless a flag overrides them",
    )  # fmt: skip
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
        "--protocol", choices=PROTOCOLS, default=None,
        help="agl1k: the original file as sent by the AGL1K reference code (base64 input_audio, "
        "its own format, no sampling parameters); prepared: decoded, mono, resampled, "
        "re-encoded (--audio-format, --sample-rate) with the sampling parameters given; "
        "default: the registry model's, else prepared (in-process models always get the "
        "clip decoded at their processor's rate)",
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
    inproc = q.add_argument_group("in-process models (--provider transformers)")
    inproc.add_argument("--device", default="auto", help="auto (cuda if present), cpu, cuda[:N]")
    inproc.add_argument(
        "--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"),
        help="auto: bfloat16 (else float16) on a GPU, float32 on the CPU",
    )  # fmt: skip
    inproc.add_argument("--batch-size", type=int, default=4, help="clips per generate call")
    inproc.add_argument("--revision", default=None, help="checkpoint branch, tag or commit")
    add_request_options(q)
    q.set_defaults(run=run_query)
    return q


def _resolve_model(args: argparse.Namespace) -> Any:
    """Apply a registry ``--model``: its route (unless ``--provider``), model
    id and protocol (unless ``--protocol``); returns its spec or None."""
    from ..exceptions import ParameterError
    from .models import get_model, is_registered

    spec = get_model(args.model) if is_registered(args.model) else None
    if spec is not None and args.provider not in (None, spec.route, *spec.alternatives):
        # e.g. --provider gemini --model gemini-2.5-pro: the provider's own id
        _log.warning(
            "%s is a registry name (route %s); with --provider %s it is sent as given, "
            "without the registry's settings", args.model, spec.route, args.provider,
        )  # fmt: skip
        spec = None
    if spec is None:
        if args.provider is None:
            raise ParameterError(
                f"--provider is needed: {args.model!r} is not a registry name "
                "(see agl-fast models list)"
            )
    else:
        args.provider = args.provider or spec.route
        args.model = spec.model_id
        if args.protocol is None and args.provider not in IN_PROCESS:
            args.protocol = spec.protocol
    args.protocol = args.protocol or "prepared"
    return spec


def _with_settings(params: dict[str, Any], spec: Any) -> dict[str, Any]:
    """``params`` with the registry's settings where no flag set one."""
    if spec is None:
        return params
    out = dict(params)
    for k, v in spec.params().items():
        if out.get(k) is None:
            out[k] = v
    return out


def _in_process(args: argparse.Namespace, spec: Any, extra: dict[str, Any]) -> tuple[Any, Any]:
    """The in-process provider and how its clips are prepared (mono, at its
    processor's rate, nothing cut to fit a request)."""
    from .hf_backend import TransformersProvider
    from .providers import make_provider
    from .runner import AudioOptions

    provider = make_provider(
        args.provider, None, model_id=args.model, device=args.device, dtype=args.dtype,
        batch_size=args.batch_size, revision=args.revision, extra=extra,
        system_prompt=spec.system_prompt if spec else None, needs=spec.needs if spec else None,
    )  # fmt: skip
    assert isinstance(provider, TransformersProvider)
    # the engine keeps a batch's worth of clips in flight, so batches fill
    args.concurrency = max(args.concurrency, provider.batch_size)
    audio = AudioOptions(format="wav", sample_rate=provider.sampling_rate,
                         max_seconds=args.max_seconds, max_bytes=None)  # fmt: skip
    return provider, audio


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


def _route(args: argparse.Namespace) -> tuple[Any, str | None, dict[str, Any], Any, dict[str, Any]]:
    """The provider, its key, the parameters, the audio options and the
    request identity (the cache key's parameters) of a run."""
    from ..exceptions import ParameterError
    from .keys import resolve_key
    from .providers import CAPABILITIES, make_provider

    spec = _resolve_model(args)
    caps = CAPABILITIES[args.provider]
    inproc = args.provider in IN_PROCESS
    params = _with_settings(request_params(args), spec)
    extra = sampling_free(params)
    agl1k = args.protocol == "agl1k"
    if agl1k and args.max_seconds is not None:
        raise ParameterError("--protocol agl1k sends whole files; drop --max-seconds")
    if agl1k and not inproc:
        # The AGL1K reference code sends no sampling parameter to an API.
        params = dict(extra)
    schema = bool(args.json_schema and caps.json_schema)
    ident: dict[str, Any] = {**params, "protocol": args.protocol, "json_schema": schema}
    if inproc:
        key = None
        provider, audio = _in_process(args, spec, extra)
        ident["audio"] = ["wav", audio.sample_rate, audio.max_seconds]
        ident["in_process"] = {"dtype": str(provider.torch_dtype), "revision": args.revision,
                               "system_prompt": provider.system_prompt}  # fmt: skip
        return provider, key, params, audio, ident
    max_seconds = args.max_seconds if args.max_seconds is not None else caps.max_seconds
    audio = _audio_options(args, caps, max_seconds, agl1k)
    ident["audio"] = ["original"] if agl1k else [audio.format, audio.sample_rate, audio.max_seconds]
    key = resolve_key(args.provider, required=args.provider != "vllm")
    provider = make_provider(
        args.provider, key, base_url=args.base_url, timeout=args.timeout, stream=args.stream,
        json_schema=args.json_schema, extra=extra,
    )  # fmt: skip
    return provider, key, params, audio, ident


def run_query(args: argparse.Namespace) -> int:
    """Execute ``query``; returns the exit status (:mod:`.options`)."""
    from ..exceptions import ParameterError
    from ..remote.redact import redact
    from . import cost, query
    from .prompts import get_template
    from .runner import Engine

    tmpl = get_template(args.prompt)
    provider, key, params, audio, ident = _route(args)
    caps = provider.caps
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
        audio.max_seconds,
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
        if todo and hasattr(provider, "open"):
            provider.open()  # load in-process weights once, before the first clip
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
        "request_identity": ident,
        "audio": vars(audio),
        "n_missing_audio": len(missing),
        "summary": vars(summary),
        "output": path.name,
    }
    if args.provider in IN_PROCESS:
        run_info["clips_cut_by_processor"] = provider.n_cut
    query.write_run_info(out / "run.json", run_info, secrets=(key,))
    return exit_status(summary, n_errors)
