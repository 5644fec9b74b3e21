"""Options shared by the commands that call model APIs (``query``,
``judge``, ``analyze``, ``spatial ask``): the request, rate-limit and budget
flags, what they become, and the exit status of a run.

Exit status: 0 all answered, 1 some items failed, 3 stopped by
``--max-cost``, 4 stopped by an authentication failure (partial results
saved in every case).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

# Kept free of heavy imports (httpx, numpy): they load in the run functions.
from ..remote.ratelimit import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_RETRY_WAIT

__all__ = [
    "EXIT_AUTH",
    "EXIT_BUDGET",
    "EXIT_FAILED",
    "IN_PROCESS",
    "PROTOCOLS",
    "PROVIDERS",
    "ROUTES",
    "SAMPLING",
    "add_request_options",
    "exit_status",
    "limits",
    "request_params",
    "sampling_free",
]

PROVIDERS = ("openai", "openrouter", "gemini", "dashscope", "vllm")
#: In-process routes, ``query`` only (:mod:`agl_fast.alm.hf_backend`).
IN_PROCESS = ("transformers",)
#: Every route a model can have (``query --provider``, the model registry).
ROUTES = PROVIDERS + IN_PROCESS
PROTOCOLS = ("prepared", "agl1k")
#: The sampling parameters (the rest of ``--param`` goes to the request as is).
SAMPLING = ("temperature", "top_p", "max_tokens", "seed")
EXIT_FAILED, EXIT_BUDGET, EXIT_AUTH = 1, 3, 4


def add_request_options(p: argparse.ArgumentParser) -> None:
    """Add the request, limit, budget and sampling flags to ``p``."""
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


def request_params(args: argparse.Namespace) -> dict[str, Any]:
    """The request parameters: the sampling flags and every ``--param``."""
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


def limits(args: argparse.Namespace) -> Any:
    """The :class:`~agl_fast.alm.runner.Limits` the flags ask for."""
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


def exit_status(summary: Any, n_errors: int | None = None) -> int:
    """The exit status of a run (see the module notes); says why it stopped."""
    if summary.stopped == "budget":
        print("stopped: --max-cost reached; partial results saved", file=sys.stderr)
        return EXIT_BUDGET
    if summary.stopped == "auth":
        print("stopped: authentication failed (check the API key)", file=sys.stderr)
        return EXIT_AUTH
    failed = summary.n_failed if n_errors is None else n_errors
    return EXIT_FAILED if failed else 0


def sampling_free(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` without the sampling parameters (:data:`SAMPLING`)."""
    return {k: v for k, v in params.items() if k not in SAMPLING}
