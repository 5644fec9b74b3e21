"""The AGL1K recordings on disk: fetch them by key, with a durable manifest.

``agl-fast agl1k fetch`` (:func:`fetch`) downloads every clip of the released
``geoLocalization_schema.csv`` from ``{base_url}/{key}/{mp3name}`` and stores
it as ``{out}/{key}.mp3``: ``mp3name`` is not unique (``STE001.mp3`` is two
recordings), the key is. Every stored or failed file is one line of
``{out}/fetch.jsonl`` (:class:`FetchRecord`). The folder is then the
``--audio-dir`` of ``query``, ``curate`` and ``serve``, which look a clip up by
key first (:func:`agl_fast.manifest.resolve_audio`).

``httpx`` (the ``alm`` extra) is needed by :func:`fetch` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..fetch_ledger import (
    DURATION_TOLERANCE_REL,
    DURATION_TOLERANCE_S,
    LEDGER_NAME,
    FetchRecord,
    Ledger,
    duration_agrees,
    read_ledger,
)
from .items import DEFAULT_BASE_URL, Item, clip_url, keep_or_fetch, read_items

if TYPE_CHECKING:
    from .fetch import FetchOptions, FetchSummary, fetch

__all__ = [
    "DEFAULT_BASE_URL",
    "DURATION_TOLERANCE_REL",
    "DURATION_TOLERANCE_S",
    "LEDGER_NAME",
    "FetchOptions",
    "FetchRecord",
    "FetchSummary",
    "Item",
    "Ledger",
    "clip_url",
    "duration_agrees",
    "fetch",
    "keep_or_fetch",
    "read_items",
    "read_ledger",
]


def __getattr__(name: str) -> Any:
    # the downloader needs httpx (an optional dependency): imported on use
    if name in ("FetchOptions", "FetchSummary", "fetch"):
        from . import fetch as _fetch_module

        return getattr(_fetch_module, name)
    raise AttributeError(name)
