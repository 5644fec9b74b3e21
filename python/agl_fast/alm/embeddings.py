"""Text embeddings through the query harness.

:func:`fetch_embeddings` sends texts to an OpenAI-compatible
``POST {base}/embeddings`` endpoint with
:class:`agl_fast.alm.openai_compat.OpenAIEmbeddings` (the chat provider's
request path and reply checks) through :class:`agl_fast.alm.runner.Engine`:
the same retries, rate limits and SQLite cache as the other queries (a text
already embedded with the same model is never sent again; the vector is
kept as the stored answer's text). OWL's Type I scores
(:mod:`agl_fast.spatial.embeddings`) are read from them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ..exceptions import AglError, ShapeError
from ..remote.store import Store, cache_key
from .openai_compat import MAX_EMBEDDING_DIMENSIONS, OpenAIEmbeddings
from .protocol import Reply
from .providers import make_provider
from .runner import Engine, Job, Limits

__all__ = [
    "EMBEDDING_PROMPT_ID",
    "MAX_DIMENSIONS",
    "EmbeddingError",
    "OpenAIEmbeddings",
    "fetch_embeddings",
]

#: Prompt id of embedding requests in the store (the text itself is the input).
EMBEDDING_PROMPT_ID = "embedding/v1"
#: Largest embedding accepted from a server (the provider's limit).
MAX_DIMENSIONS = MAX_EMBEDDING_DIMENSIONS


class EmbeddingError(AglError):
    """Texts left without an embedding after the run (failed requests)."""


def _classify(reply: Reply) -> str:
    try:
        vec = json.loads(reply.text or "")
    except ValueError:
        return "unparseable"
    return "ok" if isinstance(vec, list) and vec else "unparseable"


def fetch_embeddings(
    texts: list[str],
    *,
    model: str,
    store: str | Path,
    provider: str = "openai",
    base_url: str | None = None,
    key: str | None = None,
    limits: Limits | None = None,
    progress: bool = False,
) -> np.ndarray:
    """Embeddings ``[len(texts), D]`` (float64) of texts, cached in ``store``.

    Parameters
    ----------
    texts : list of str
        Newlines are replaced by spaces first, as OWL does.
    model : str
        Embedding model (OWL: ``text-embedding-ada-002``).
    store : path
        The harness's SQLite store (``results.sqlite``).
    provider, base_url, key : str
        An OpenAI-compatible provider of :data:`agl_fast.alm.providers.CAPABILITIES`,
        its base URL (``.../v1``) and key.
    limits : agl_fast.alm.runner.Limits, optional
        Concurrency, rate limits and retries.

    Raises
    ------
    EmbeddingError
        When some text got no embedding (its error is in the store).
    ShapeError
        When the server's embeddings differ in length.
    """
    clean = [str(t).replace("\n", " ") for t in texts]
    if not clean:
        return np.zeros((0, 0))
    prov = make_provider(provider, key, base_url=base_url)
    emb = OpenAIEmbeddings(prov.name, key, base_url=prov.base_url, timeout=prov.timeout,
                           max_response_bytes=prov.max_response_bytes)  # fmt: skip
    prompt_hash = hashlib.sha256(EMBEDDING_PROMPT_ID.encode()).hexdigest()
    jobs = []
    for i, t in enumerate(clean):
        h = hashlib.sha256(t.encode("utf-8")).hexdigest()
        jobs.append(Job(key=f"text-{i}", cache_key=cache_key(provider, model, prompt_hash, h, {}),
                        prompt=t, input_hash=h))  # fmt: skip
    with Store(store) as db:
        engine = Engine(emb, model, db, {}, EMBEDDING_PROMPT_ID, prompt_hash, _classify,
                        limits=limits, progress=progress)  # fmt: skip
        engine.run(jobs)
        rows = [db.get(j.cache_key) for j in jobs]
    missing = [t for t, r in zip(clean, rows, strict=True) if not r or r["answer_class"] != "ok"]
    if missing:
        raise EmbeddingError(
            f"{len(missing)} of {len(clean)} texts got no embedding "
            f"(first: {missing[0][:80]!r}); see the store's error column"
        )
    vecs = [json.loads(r["raw_text"]) for r in rows if r is not None]
    if len({len(v) for v in vecs}) > 1:
        raise ShapeError(f"embeddings of different lengths: {sorted({len(v) for v in vecs})}")
    return np.asarray(vecs, dtype=np.float64).reshape(len(clean), -1)
