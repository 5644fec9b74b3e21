"""Download the AGL1K recordings: concurrent, rate-limited, retried, resumable.

Each clip is fetched from ``{base_url}/{key}/{mp3name}`` into a temporary
file, checked (the declared ``Content-Length``, a size cap, decoding by
agl-fast's own decoder) and renamed to ``{out}/{key}{suffix}`` only when it
passed; then its line (:class:`~agl_fast.dataset.ledger.FetchRecord`) is
appended to ``{out}/fetch.jsonl`` and synced. A rerun keeps what the
manifest vouches for (:func:`~agl_fast.dataset.items.keep_or_fetch`).

Requests share one token bucket (``rate`` a second) and at most ``workers``
connections. 5xx, 408, 429, connection errors, timeouts and cut bodies are
retried with exponential backoff and full jitter (at least the server's
``Retry-After``); other statuses are recorded as failures at once. Each file
has an overall deadline covering all its attempts, so a server that drips
bytes cannot hold a worker.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .. import __version__
from ..alm.ratelimit import (
    DEFAULT_MAX_RETRY_WAIT,
    TokenBucket,
    backoff_delay,
    parse_retry_after,
)
from ..audio import load_many
from ..exceptions import AglError, AudioDecodeError, ParameterError
from .items import DEFAULT_BASE_URL, Item, keep_or_fetch, read_items, remove_partials
from .ledger import FetchRecord, Ledger, duration_agrees

__all__ = ["RETRY_STATUSES", "FetchOptions", "FetchSummary", "decoded_seconds", "fetch"]

log = logging.getLogger("agl_fast.dataset")

#: HTTP statuses retried (with backoff); every other non-200 status fails at once.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
#: Name of the run summary written next to the fetch manifest.
SUMMARY_NAME = "fetch_summary.json"
#: Longest decode of a clip whose ``mp3seconds`` is unknown, in seconds.
_DECODE_CAP_S = 1800.0


@dataclass
class FetchOptions:
    """Settings of a fetch (the flags of ``agl-fast agl1k fetch``).

    Attributes
    ----------
    base_url : str
        Download root; a clip is ``{base_url}/{key}/{mp3name}``.
    workers : int
        Files downloaded at once.
    rate : float or None
        Requests a second, over all workers and retries (None: no limit).
    retries : int
        Retries of a file after its first attempt.
    backoff_base, backoff_cap : float
        Backoff before retry ``n`` is uniform in ``[0, min(cap, base * 2**n)]`` s.
    max_retry_wait : float
        A ``Retry-After`` longer than this (s) fails the file instead.
    connect_timeout, read_timeout : float
        Seconds to connect, and to wait for each piece of the answer.
    deadline : float
        Seconds one file may take, all attempts and waits included.
    max_bytes : int
        Largest file accepted (a larger ``Content-Length`` or body fails).
    max_redirects : int
        Redirects followed per request.
    verify : {"hash", "size"}
        What a rerun checks before keeping a stored file.
    limit : int or None
        The first ``limit`` clips of the manifest only.
    """

    base_url: str = DEFAULT_BASE_URL
    workers: int = 4
    rate: float | None = 2.0
    retries: int = 5
    backoff_base: float = 1.0
    backoff_cap: float = 60.0
    max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    deadline: float = 600.0
    max_bytes: int = 256 << 20
    max_redirects: int = 5
    verify: str = "hash"
    limit: int | None = None

    def validate(self) -> None:
        """Raise :class:`ParameterError` naming the first bad setting."""
        if not self.base_url.startswith(("http://", "https://")):
            raise ParameterError(f"base URL must start with http:// or https://: {self.base_url}")
        for name in ("workers", "max_bytes"):
            if int(getattr(self, name)) < 1:
                raise ParameterError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("retries", "max_redirects"):
            if int(getattr(self, name)) < 0:
                raise ParameterError(f"{name} must be >= 0, got {getattr(self, name)}")
        positive = ("connect_timeout", "read_timeout", "deadline", "backoff_cap")
        for name in (*positive, "backoff_base", "max_retry_wait"):
            v = float(getattr(self, name))
            if not math.isfinite(v) or v < 0 or (v == 0 and name in positive):
                raise ParameterError(f"{name} must be a finite number > 0, got {v}")
        if self.rate is not None and not (math.isfinite(self.rate) and self.rate > 0):
            raise ParameterError(f"rate must be > 0 requests a second, got {self.rate}")
        if self.verify not in ("hash", "size"):
            raise ParameterError(f"verify must be 'hash' or 'size', got {self.verify!r}")
        if self.limit is not None and self.limit < 0:
            raise ParameterError(f"limit must be >= 0, got {self.limit}")


@dataclass
class FetchSummary:
    """What a fetch did (also written to ``{out}/fetch_summary.json``)."""

    clips: int = 0
    kept: int = 0
    fetched: int = 0
    failed: int = 0
    duration_mismatch: list[str] = field(default_factory=list)
    duration_unknown: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    bytes: int = 0
    partials_removed: int = 0
    seconds: float = 0.0

    def add(self, rec: FetchRecord) -> None:
        self.requests += rec.attempts
        if rec.status != "ok":
            self.failed += 1
            kind = rec.error_type or "error"
            self.errors[kind] = self.errors.get(kind, 0) + 1
            return
        self.fetched += 1
        self.bytes += rec.bytes or 0
        if rec.duration_ok is False:
            self.duration_mismatch.append(rec.key)
        elif rec.duration_ok is None:
            self.duration_unknown += 1


@dataclass
class _Try:
    """The outcome of one request."""

    ok: bool
    retry: bool = False
    error_type: str | None = None
    reason: str | None = None
    retry_after: float | None = None
    final_url: str | None = None
    nbytes: int = 0
    sha256: str | None = None


def decoded_seconds(path: Path, fmt: str | None, cap: float) -> float:
    """Duration of an audio file as agl-fast's decoder reads it, in seconds
    (read up to ``cap`` seconds: a longer file reports ``cap``).

    Raises
    ------
    AudioDecodeError
        The file does not decode.
    """
    t = load_many([str(path)], sr=None, mono=True, max_duration=cap, n_threads=1, formats=[fmt])
    kind = t.column("error_type")[0].as_py()
    if kind is not None:
        raise AudioDecodeError(f"{kind}: {t.column('error_message')[0].as_py()}")
    return float(t.column("duration")[0].as_py())


def _failed(item: Item, attempts: int, error_type: str, reason: str) -> FetchRecord:
    return FetchRecord(
        key=item.key,
        mp3name=item.mp3name,
        url=item.url,
        status="failed",
        mp3seconds=item.mp3seconds,
        error_type=error_type,
        reason=reason,
        attempts=attempts,
    )


def _content_length(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        return None
    return n if n >= 0 else None


async def _receive(resp: httpx.Response, opts: FetchOptions, part: Path) -> _Try:
    """Read a 200 answer into ``part``, checking sizes; or classify a status."""
    final = str(resp.url)
    code = resp.status_code
    if code != 200:
        retry = code in RETRY_STATUSES
        wait = parse_retry_after(resp.headers.get("retry-after")) if retry else None
        why = f"HTTP {code} {resp.reason_phrase} for {final}"
        return _Try(False, retry, f"http_{code}", why, wait, final)
    encoding = resp.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        return _Try(False, False, "encoding", f"unasked Content-Encoding {encoding!r}", None, final)
    declared = _content_length(resp.headers.get("content-length"))
    if declared is not None and declared > opts.max_bytes:
        why = f"Content-Length {declared} exceeds the {opts.max_bytes}-byte limit"
        return _Try(False, False, "too_large", why, None, final)
    h = hashlib.sha256()
    n = 0
    with part.open("wb") as fh:
        try:
            async for chunk in resp.aiter_raw():
                n += len(chunk)
                if n > opts.max_bytes:
                    why = f"body exceeds the {opts.max_bytes}-byte limit"
                    return _Try(False, False, "too_large", why, None, final)
                h.update(chunk)
                fh.write(chunk)
        except httpx.RemoteProtocolError:
            pass  # a cut body: counted below
        fh.flush()
        os.fsync(fh.fileno())
    if (declared is not None and n != declared) or n == 0:
        of = f" of {declared} declared" if declared is not None else ""
        return _Try(False, True, "truncated", f"body ended after {n} bytes{of}", None, final)
    return _Try(True, final_url=final, nbytes=n, sha256=h.hexdigest())


async def _attempt(client: httpx.AsyncClient, item: Item, opts: FetchOptions) -> _Try:
    """One request for ``item``, errors classified."""
    try:
        async with client.stream("GET", item.url) as resp:
            return await _receive(resp, opts, item.part)
    except httpx.TooManyRedirects:
        why = f"more than {opts.max_redirects} redirects from {item.url}"
        return _Try(False, False, "redirects", why)
    except httpx.TimeoutException as exc:
        return _Try(False, True, "timeout", f"{type(exc).__name__} from {item.url}")
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        return _Try(False, False, "bad_url", f"{item.url}: {exc}")
    except httpx.TransportError as exc:
        return _Try(False, True, "connection", f"{type(exc).__name__}: {exc}")


def _retry_wait(t: _Try, attempts: int, opts: FetchOptions) -> float | None:
    """Seconds to wait before the next attempt, or None to give up (``t``'s
    reason then says why)."""
    if not t.retry:
        return None
    if attempts > opts.retries:
        t.reason = f"{t.reason} (gave up after {attempts} attempts)"
        return None
    asked = t.retry_after
    if asked is not None and asked > opts.max_retry_wait:
        t.error_type = "retry_after"
        t.reason = f"{t.reason}: the server asks to wait {asked:g} s (> {opts.max_retry_wait:g} s)"
        return None
    wait = backoff_delay(attempts - 1, opts.backoff_base, opts.backoff_cap)
    return max(wait, asked or 0.0)


async def _download(
    client: httpx.AsyncClient, bucket: TokenBucket, item: Item, opts: FetchOptions
) -> tuple[_Try, int]:
    """Attempts for ``item`` until one succeeds, it fails for good, or the
    deadline passes; returns the last outcome and the number of requests."""
    attempts = [0]

    async def tries() -> _Try:
        while True:
            await bucket.acquire()
            attempts[0] += 1
            t = await _attempt(client, item, opts)
            if t.ok:
                return t
            wait = _retry_wait(t, attempts[0], opts)
            if wait is None:
                return t
            log.info("%s: %s; retry %d in %.2f s", item.key, t.reason, attempts[0], wait)
            await asyncio.sleep(wait)

    try:
        return await asyncio.wait_for(tries(), opts.deadline), attempts[0]
    except asyncio.TimeoutError:
        why = f"no complete file within the {opts.deadline:g} s deadline ({attempts[0]} attempts)"
        return _Try(False, False, "deadline", why), attempts[0]


async def _fetch_item(
    client: httpx.AsyncClient, bucket: TokenBucket, item: Item, opts: FetchOptions
) -> FetchRecord:
    """Download, verify and store one clip; its manifest record."""
    if item.dest is None:
        return _failed(item, 0, "bad_name", item.problem or "no destination")
    t, attempts = await _download(client, bucket, item, opts)
    part = item.part
    if not t.ok:
        part.unlink(missing_ok=True)
        return _failed(item, attempts, t.error_type or "error", t.reason or "failed")
    cap = _DECODE_CAP_S if item.mp3seconds is None else 2.0 * item.mp3seconds + 60.0
    fmt = item.dest.suffix.lstrip(".") or None
    try:
        seconds = await asyncio.to_thread(decoded_seconds, part, fmt, cap)
    except AglError as exc:
        part.unlink(missing_ok=True)
        return _failed(item, attempts, "not_audio", f"the file does not decode ({exc})")
    os.replace(part, item.dest)
    _sync_dir(item.dest.parent)
    agrees = duration_agrees(seconds, item.mp3seconds)
    if agrees is False:
        log.warning(
            "%s: decoded %.2f s but mp3seconds says %.2f s: a different recording?",
            item.key, seconds, item.mp3seconds,
        )  # fmt: skip
    return FetchRecord(
        key=item.key,
        mp3name=item.mp3name,
        url=item.url,
        status="ok",
        path=item.dest.name,
        final_url=t.final_url,
        bytes=t.nbytes,
        sha256=t.sha256,
        seconds=seconds,
        mp3seconds=item.mp3seconds,
        duration_ok=agrees,
        attempts=attempts,
    )


def _sync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (where the platform allows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


async def _run(todo: list[Item], ledger: Ledger, opts: FetchOptions, summary: FetchSummary) -> None:
    rate = None if opts.rate is None else opts.rate * 60.0
    bucket = TokenBucket(rate, capacity=max(1.0, opts.rate or 1.0))
    timeout = httpx.Timeout(
        connect=opts.connect_timeout,
        read=opts.read_timeout,
        write=opts.read_timeout,
        pool=opts.deadline,
    )
    n = max(1, min(opts.workers, len(todo)))
    it = iter(todo)

    async def worker(client: httpx.AsyncClient) -> None:
        for item in it:
            rec = await _fetch_item(client, bucket, item, opts)
            ledger.append(rec)
            summary.add(rec)
            if rec.status == "ok":
                log.info("%s: %d bytes, %.2f s", rec.key, rec.bytes, rec.seconds)
            else:
                log.warning("%s: %s (%s)", rec.key, rec.reason, rec.error_type)

    async with httpx.AsyncClient(
        timeout=timeout,
        follow_redirects=True,
        max_redirects=opts.max_redirects,
        limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
        headers={"User-Agent": f"agl-fast/{__version__}", "Accept-Encoding": "identity"},
    ) as client:
        await asyncio.gather(*(worker(client) for _ in range(n)))


def fetch(manifest_path: str | Path, out: str | Path, options: FetchOptions) -> FetchSummary:
    """Fetch every clip of a manifest into ``out``, resuming a previous run.

    Parameters
    ----------
    manifest_path : str or Path
        The released ``geoLocalization_schema.csv`` (or any manifest with
        ``key`` and ``mp3name``; ``mp3seconds`` enables the duration check).
    out : str or Path
        Output folder: the clips as ``{key}{suffix}``, ``fetch.jsonl`` (one
        :class:`~agl_fast.dataset.ledger.FetchRecord` a line) and
        ``fetch_summary.json``.
    options : FetchOptions
        The settings.

    Returns
    -------
    FetchSummary
        Counts of kept, fetched and failed clips, the failure kinds, and
        the keys whose decoded duration disagrees with ``mp3seconds``.

    Raises
    ------
    ParameterError
        Bad options or an unreadable manifest.
    """
    options.validate()
    root = Path(out)
    items = read_items(manifest_path, root, options.base_url, options.limit)
    start = time.monotonic()
    summary = FetchSummary(clips=len(items))
    with Ledger(root) as ledger:
        summary.partials_removed = remove_partials(root)
        kept, todo = keep_or_fetch(items, ledger.records, options.verify)
        summary.kept = len(kept)
        log.info("%d clips: %d already stored and verified, %d to fetch", len(items), len(kept),
                 len(todo))  # fmt: skip
        if todo:
            asyncio.run(_run(todo, ledger, options, summary))
    summary.seconds = round(time.monotonic() - start, 3)
    _write_summary(root, summary, options)
    return summary


def _write_summary(root: Path, summary: FetchSummary, options: FetchOptions) -> None:
    doc: dict[str, Any] = {
        "agl_fast": __version__,
        **asdict(summary),
        "errors": dict(Counter(summary.errors).most_common()),
        "options": asdict(options),
    }
    tmp = root / f".{SUMMARY_NAME}.tmp"
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(root / SUMMARY_NAME)
