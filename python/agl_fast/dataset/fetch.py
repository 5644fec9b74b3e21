"""Download the AGL1K recordings: concurrent, rate-limited, retried, resumable.

Each clip is fetched from ``{base_url}/{key}/{mp3name}`` into a temporary
file, checked (the declared ``Content-Length``, a size cap, decoding by
agl-fast's own decoder) and renamed to ``{out}/{key}{suffix}`` only when it
passed; then its line (:class:`~agl_fast.fetch_ledger.FetchRecord`) is
appended to ``{out}/fetch.jsonl`` and synced. A rerun keeps what the
manifest vouches for (:func:`~agl_fast.dataset.items.keep_or_fetch`) and
moves every other stored file aside before fetching it again
(:func:`~agl_fast.dataset.items.set_aside`). No file is written outside
``out`` (:mod:`~agl_fast.dataset.outdir`), and redirects reach only the
addresses :mod:`~agl_fast.dataset.redirects` allows.

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
from .._internal.safe_files import check_tree, create_new, sync_dir, write_atomic
from ..audio import load
from ..exceptions import AglError, AudioDecodeError, ParameterError
from ..fetch_ledger import FetchRecord, Ledger, duration_agrees
from ..remote.ratelimit import (
    DEFAULT_MAX_RETRY_WAIT,
    TokenBucket,
    backoff_delay,
    parse_retry_after,
)
from .items import DEFAULT_BASE_URL, Item, keep_or_fetch, read_items, set_aside
from .outdir import remove_temporaries
from .redirects import RedirectGuard, RedirectRefused

__all__ = [
    "CHECK_RATE",
    "MIN_BITRATE",
    "RETRY_STATUSES",
    "FetchOptions",
    "FetchSummary",
    "decoded_seconds",
    "fetch",
    "max_seconds",
]

log = logging.getLogger("agl_fast.dataset")

#: HTTP statuses retried (with backoff); every other non-200 status fails at once.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
#: Name of the run summary written next to the fetch manifest.
SUMMARY_NAME = "fetch_summary.json"
#: Rate (Hz) at which a downloaded file is decoded to check it and time it:
#: the duration to 5 ms, and 800 bytes of memory a second of audio whatever
#: the file's own rate.
CHECK_RATE = 200
#: Lowest bit rate of a format, in bits a second (MP3: MPEG-2.5 layer III at
#: 8 kbit/s): a file of ``n`` bytes holds at most ``8 n / rate`` seconds.
MIN_BITRATE: dict[str, int] = {"mp3": 8000}
#: The same for the other formats (Opus, AAC, Vorbis go down to about 6 kbit/s).
MIN_BITRATE_OTHER = 4000


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
    """What a fetch did (also written to ``{out}/fetch_summary.json``).

    ``partials_removed`` counts the temporary files of an interrupted run,
    ``set_aside`` the stored files moved aside before their refetch
    (:func:`~agl_fast.dataset.items.set_aside`), ``bad_mp3seconds`` the
    keys whose ``mp3seconds`` is not a finite number >= 0.
    """

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
    set_aside: int = 0
    bad_mp3seconds: list[str] = field(default_factory=list)
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


def max_seconds(nbytes: int, fmt: str | None) -> float:
    """The longest audio a file of ``nbytes`` bytes in format ``fmt`` can
    hold, in seconds (at the format's :data:`MIN_BITRATE`, plus one second).

    Examples
    --------
    >>> max_seconds(48_000_000, "mp3")
    48001.0
    """
    rate = MIN_BITRATE.get(fmt or "", MIN_BITRATE_OTHER)
    return 8.0 * nbytes / rate + 1.0


def decoded_seconds(path: Path, fmt: str | None, nbytes: int) -> float:
    """Duration of an audio file as agl-fast's decoder reads it, in seconds
    (to ``1 / CHECK_RATE``).

    The whole file is decoded, at :data:`CHECK_RATE` Hz: memory grows with
    what the file's bytes can hold (:func:`max_seconds`), never with a
    manifest's claim.

    Raises
    ------
    AudioDecodeError
        The file does not decode, or decodes to more than its bytes can hold.
    """
    cap = max_seconds(nbytes, fmt)
    y, _ = load(str(path), sr=CHECK_RATE, mono=True, max_duration=cap, res_type="fast", format=fmt)
    frames = int(y.shape[-1])
    if frames >= int(cap * CHECK_RATE):
        raise AudioDecodeError(
            f"it decodes to more than {cap:g} s, more than {nbytes} bytes of "
            f"{fmt or 'audio'} can hold"
        )
    return frames / CHECK_RATE


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
    with os.fdopen(create_new(part), "wb") as fh:
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
    except RedirectRefused as exc:
        return _Try(False, False, "redirect_refused", str(exc))
    except httpx.RemoteProtocolError as exc:
        if "location header" in str(exc).lower():
            why = f"refused a redirect from {item.url}: {exc}"
            return _Try(False, False, "redirect_refused", why)
        return _Try(False, True, "connection", f"{type(exc).__name__}: {exc}")
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
    fmt = item.dest.suffix.lstrip(".") or None
    try:
        seconds = await asyncio.to_thread(decoded_seconds, part, fmt, t.nbytes)
    except AglError as exc:
        part.unlink(missing_ok=True)
        return _failed(item, attempts, "not_audio", f"the file does not decode ({exc})")
    os.replace(part, item.dest)  # within the folder: replaces a link, never follows it
    sync_dir(item.dest.parent)
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

    guard = RedirectGuard(opts.base_url)
    async with httpx.AsyncClient(
        timeout=timeout,
        event_hooks={"request": [guard], "response": [guard.check_peer]},
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
        :class:`~agl_fast.fetch_ledger.FetchRecord` a line) and
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
    UnsafePathError
        ``out`` holds a symbolic link leading outside it, or its
        ``fetch.jsonl`` is a link (an :class:`~agl_fast.exceptions.AglIOError`).
    """
    options.validate()
    root = Path(os.path.realpath(out))  # created by the Ledger
    items = read_items(manifest_path, root, options.base_url, options.limit)
    start = time.monotonic()
    summary = FetchSummary(clips=len(items))
    summary.bad_mp3seconds = [i.key for i in items if i.mp3seconds_problem is not None]
    with Ledger(root) as ledger:
        summary.partials_removed = remove_temporaries(root)
        check_tree(root)
        kept, todo = keep_or_fetch(items, ledger.records, options.verify)
        summary.kept = len(kept)
        summary.set_aside = set_aside(todo)
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
    write_atomic(root / SUMMARY_NAME, json.dumps(doc, indent=2) + "\n", fsync=True)
