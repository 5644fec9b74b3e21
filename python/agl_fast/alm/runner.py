"""The async engine: bounded concurrency, rate limits, retries, budget, store.

:class:`Engine` sends :class:`Job` objects through one provider. Each job is
looked up in the store first (a finished answer is never sent again), then
sent with at most ``concurrency`` requests in flight, under request- and
token-per-minute buckets, behind a circuit breaker, retrying transient
failures with exponential backoff and jitter (``Retry-After`` honoured).
Every outcome is committed before the next job starts, so a killed run
resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ..remote.ratelimit import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRY_WAIT,
    CircuitBreaker,
    TokenBucket,
    backoff_delay,
)
from ..remote.redact import redact
from ..remote.store import Store, canonical_params
from .audio import PreparedAudio, passthrough, prepare
from .cost import Price
from .protocol import Provider, ProviderError, Reply

_log = logging.getLogger("agl_fast.alm")


@dataclass
class Job:
    """One request: its clip or row key, identity, prompt and optional audio."""

    key: str
    cache_key: str
    prompt: str
    input_hash: str
    audio_path: Path | None = None
    audio_seconds: float = 0.0
    est_prompt_tokens: int = 0
    est_audio_tokens: int = 0


@dataclass
class Limits:
    """Flow-control settings of one provider."""

    concurrency: int = 4
    rpm: float | None = None
    tpm: float | None = None
    max_attempts: int = 6
    backoff_base: float = 1.0
    backoff_cap: float = 60.0
    breaker_threshold: int = 8
    breaker_cooldown: float = 30.0
    max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES


@dataclass
class AudioOptions:
    format: str = "wav"
    sample_rate: int | None = 16000
    max_seconds: float | None = None
    max_bytes: int | None = None
    mono: bool = True  # False: send the file's channels (binaural clips)
    passthrough: bool = False


@dataclass
class RunSummary:
    """What a run did."""

    n_jobs: int = 0
    n_cached: int = 0
    n_sent: int = 0
    n_answered: int = 0
    n_failed: int = 0
    n_not_started: int = 0
    n_requests: int = 0
    cost_usd: float = 0.0
    stopped: str | None = None
    classes: dict[str, int] = field(default_factory=dict)


Classifier = Callable[[Reply], str]


class Engine:
    """Runs jobs through ``provider`` for ``model``; see the module docs."""

    def __init__(
        self,
        provider: Provider,
        model: str,
        store: Store,
        params: dict[str, Any],
        prompt_id: str,
        prompt_hash: str,
        classify: Classifier,
        price: Price | None = None,
        limits: Limits | None = None,
        audio: AudioOptions | None = None,
        max_cost: float | None = None,
        rerun_failed: bool = False,
        progress: bool = True,
        seed: int | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.store = store
        self.params = dict(params)
        self.prompt_id = prompt_id
        self.prompt_hash = prompt_hash
        self.classify = classify
        self.price = price
        self.limits = limits or Limits()
        # The engine owns flow control: the response cap and the key's redaction.
        self.provider.max_response_bytes = int(self.limits.max_response_bytes)
        self.store.add_secret(provider.key)
        self.audio = audio or AudioOptions()
        self.max_cost = max_cost
        self.rerun_failed = rerun_failed
        self.progress = progress
        self._bar: Any = None
        self.rng = random.Random(seed)
        self.summary = RunSummary()
        self._reserved = 0.0
        self._stop: str | None = None

    def estimate_cost(self, job: Job) -> float | None:
        """Upper-bound cost of one job (output at ``max_tokens``, 1024 if unset)."""
        if self.price is None:
            return None
        out = self.params.get("max_tokens") or 1024
        return self.price.cost(job.est_prompt_tokens, out, job.est_audio_tokens)

    def _cost(self, job: Job, reply: Reply) -> float | None:
        if self.price is None:
            return None
        pt = reply.prompt_tokens if reply.prompt_tokens is not None else job.est_prompt_tokens
        at = reply.audio_tokens if reply.audio_tokens is not None else job.est_audio_tokens
        return self.price.cost(pt, reply.completion_tokens or 0, at)

    def _report(self, final: bool = False) -> None:
        """Progress as every long command shows it: a tqdm bar on a terminal
        (the ``cli`` extra), and the final counts as one line elsewhere."""
        if not self.progress:
            return
        s = self.summary
        done = s.n_cached + s.n_answered
        if self._bar is None and sys.stderr.isatty():
            try:
                from tqdm import tqdm
            except ImportError:
                self._bar = False
            else:
                self._bar = tqdm(
                    total=s.n_jobs,
                    unit="request",
                    desc=f"{self.provider.name}:{self.model}",
                    dynamic_ncols=True,
                    file=sys.stderr,
                )
        if self._bar:
            self._bar.n = done
            self._bar.set_postfix(failed=s.n_failed, cost=f"${s.cost_usd:.4f}", refresh=True)
            if final:
                self._bar.close()
                self._bar = None
            return
        if final:
            line = (
                f"[{self.provider.name}:{self.model}] done {done}/{s.n_jobs} "
                f"failed {s.n_failed} cost ${s.cost_usd:.4f}"
            )
            print(line, file=sys.stderr, flush=True)

    def _row(self, job: Job, **kw: Any) -> dict[str, Any]:
        row = {
            "cache_key": job.cache_key,
            "provider": self.provider.name,
            "model": self.model,
            "prompt_id": self.prompt_id,
            "prompt_hash": self.prompt_hash,
            "input_hash": job.input_hash,
            "params": canonical_params(self.params),
        }
        row.update(kw)
        return row

    async def _audio(self, job: Job) -> tuple[PreparedAudio | None, dict[str, Any]] | None:
        """The job's audio as sent and its row fields; None (with an error
        row written) when the file cannot be prepared."""
        if job.audio_path is None:
            return None, {}
        try:
            if self.audio.passthrough:
                audio = await asyncio.to_thread(passthrough, job.audio_path, self.audio.max_bytes)
            else:
                audio = await asyncio.to_thread(
                    prepare, job.audio_path, self.audio.format, self.audio.sample_rate,
                    self.audio.max_seconds, self.audio.max_bytes, self.audio.mono,
                )  # fmt: skip
        except Exception as exc:
            self.store.put(
                self._row(
                    job,
                    answer_class="error",
                    retryable=0,
                    attempts=0,
                    error=f"audio: {type(exc).__name__}: {exc}",
                    error_type=type(exc).__name__,
                )
            )
            self.summary.n_failed += 1
            return None
        extra = {
            "audio_seconds_sent": audio.seconds_sent,
            "audio_seconds_original": audio.seconds_original,
            "truncated": int(audio.truncated),
        }
        return audio, extra

    def _retry(
        self, job: Job, exc: ProviderError, attempt: int
    ) -> tuple[ProviderError, float | None]:
        """The error to record and the wait before the next attempt (None:
        give up now)."""
        cap = self.limits.max_retry_wait
        delay = backoff_delay(
            attempt - 1, self.limits.backoff_base, min(self.limits.backoff_cap, cap), self.rng
        )
        if exc.retry_after is not None and not exc.retry_after <= cap:
            err = ProviderError(
                f"{exc}; the server asked to retry after "
                f"{exc.retry_after_raw or exc.retry_after} s, over --max-retry-wait {cap:g} s",
                status=exc.status,
                retryable=True,
                error_type="RateLimited",
            )
            _log.warning("%s: %s", job.key, redact(str(err), self.provider.key))
            return err, None
        if exc.retry_after is not None:
            delay = max(delay, exc.retry_after)
        return exc, delay

    def _answered(
        self, job: Job, reply: Any, t0: float, attempt: int, extra: dict[str, Any]
    ) -> None:
        """Store an answer and count it."""
        cls = self.classify(reply)
        cost = self._cost(job, reply)
        self.store.put(
            self._row(
                job,
                answer_class=cls,
                retryable=0,
                raw_text=reply.text,
                reasoning=reply.reasoning,
                finish_reason=reply.finish_reason,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                audio_tokens=reply.audio_tokens,
                cost_usd=cost,
                latency_s=time.monotonic() - t0,
                attempts=attempt,
                http_status=200,
                **extra,
            )
        )
        self.summary.n_answered += 1
        self.summary.cost_usd += cost or 0.0
        self.summary.classes[cls] = self.summary.classes.get(cls, 0) + 1

    def _failed(
        self, job: Job, err: ProviderError | None, t0: float, attempt: int, extra: dict[str, Any]
    ) -> None:
        """Store the error row of a job that got no answer."""
        self.store.put(
            self._row(
                job,
                answer_class="error",
                retryable=int(bool(err and err.retryable)),
                attempts=attempt,
                http_status=err.status if err else None,
                error=str(err) if err else "run stopped: authentication failed",
                error_type=err.error_type if err else "AuthenticationFailed",
                latency_s=time.monotonic() - t0,
                **extra,
            )
        )
        self.summary.n_failed += 1
        self.summary.classes["error"] = self.summary.classes.get("error", 0) + 1

    async def _one(
        self,
        client: httpx.AsyncClient,
        job: Job,
        rpm: TokenBucket,
        tpm: TokenBucket,
        breaker: CircuitBreaker,
    ) -> None:
        prepared = await self._audio(job)
        if prepared is None:
            return
        audio, extra = prepared
        max_out = self.params.get("max_tokens") or 1024
        err: ProviderError | None = None
        t0 = time.monotonic()
        attempt = 0
        for attempt in range(1, self.limits.max_attempts + 1):
            if self._stop == "auth":
                break
            await breaker.wait()
            await rpm.acquire(1)
            want = job.est_prompt_tokens + max_out
            await tpm.acquire(want)
            t0 = time.monotonic()
            self.summary.n_requests += 1
            try:
                reply = await self.provider.complete(
                    client, self.model, job.prompt, audio, self.params
                )
            except ProviderError as exc:
                err = exc
                if not exc.retryable:
                    breaker.success()
                    if exc.is_auth:
                        self._stop = "auth"
                    break
                breaker.failure()
                err, delay = self._retry(job, exc, attempt)
                if delay is None:
                    break
                if attempt < self.limits.max_attempts:
                    _log.warning(
                        "%s: attempt %d of %d failed (%s); retrying in %.1f s",
                        job.key, attempt, self.limits.max_attempts,
                        redact(str(exc), self.provider.key), delay,
                    )  # fmt: skip
                    await asyncio.sleep(delay)
                continue
            breaker.success()
            used = (reply.prompt_tokens or job.est_prompt_tokens) + (reply.completion_tokens or 0)
            tpm.adjust(want - used)
            self._answered(job, reply, t0, attempt, extra)
            return
        assert err is not None or self._stop == "auth"
        self._failed(job, err, t0, attempt, extra)

    async def _worker(
        self,
        client: httpx.AsyncClient,
        it: Iterator[Job],
        rpm: TokenBucket,
        tpm: TokenBucket,
        breaker: CircuitBreaker,
    ) -> None:
        for job in it:
            if self._stop:
                self.summary.n_not_started += 1
                continue
            est = self.estimate_cost(job) or 0.0
            if self.max_cost is not None and (
                self.summary.cost_usd + self._reserved + est > self.max_cost
            ):
                self._stop = "budget"
                self.summary.n_not_started += 1
                continue
            self._reserved += est
            self.summary.n_sent += 1
            try:
                await self._one(client, job, rpm, tpm, breaker)
            finally:
                self._reserved -= est
            self._report()

    async def run_async(self, jobs: list[Job]) -> RunSummary:
        self.summary.n_jobs = len(jobs)
        todo = []
        seen: set[str] = set()
        for j in jobs:
            if j.cache_key in seen or self.store.is_done(j.cache_key, self.rerun_failed):
                self.summary.n_cached += 1
            else:
                todo.append(j)
            seen.add(j.cache_key)
        lim = self.limits
        rpm = TokenBucket(lim.rpm)
        tpm = TokenBucket(lim.tpm, capacity=lim.tpm)
        breaker = CircuitBreaker(lim.breaker_threshold, lim.breaker_cooldown)
        it = iter(todo)
        n = max(1, int(lim.concurrency))
        async with httpx.AsyncClient(
            limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
            timeout=self.provider.timeout,
        ) as client:
            await asyncio.gather(*(self._worker(client, it, rpm, tpm, breaker) for _ in range(n)))
        self.summary.stopped = self._stop
        self._report(final=True)
        return self.summary

    def run(self, jobs: list[Job]) -> RunSummary:
        """Run every job; returns when all are answered, failed or the run stopped."""
        return asyncio.run(self.run_async(jobs))
