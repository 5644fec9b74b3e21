"""Text embeddings through the query harness, and OWL's Type I scores.

OWL scores event detection (Type I) by embedding similarity
(``seld_cot/owl/scripts/calculate_map.py`` in its repository): each answer
(newlines made spaces) is embedded, its cosine similarity with the
embedding of every class name of the vocabulary (SpatialSoundQA's 355
AudioSet classes, ``class_labels_indices_subset.csv``) is the answer's score
for that class, the targets are the multi-hot vectors of the reference
event names (matched in lower case), and the figure is the mean over
classes of the per-class average precision.

:func:`fetch_embeddings` sends texts to an OpenAI-compatible
``POST {base}/embeddings`` endpoint with
:class:`agl_fast.alm.openai_compat.OpenAIEmbeddings` (the chat provider's
request path and reply checks) through :class:`agl_fast.alm.runner.Engine`:
the same retries, rate limits and SQLite cache as the other queries (a text
already embedded with the same model is never sent again; the vector is
kept as the stored answer's text). :func:`embedding_scores` gives the score
matrix; :func:`agl_fast.spatial.answers.score_qa` uses it with
``type1='embedding'``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ..alm.openai_compat import MAX_EMBEDDING_DIMENSIONS, OpenAIEmbeddings
from ..alm.providers import Reply, make_provider
from ..alm.runner import Engine, Job, Limits
from ..alm.store import Store, cache_key
from ..exceptions import AglError, ParameterError, ShapeError

__all__ = [
    "EMBEDDING_PROMPT_ID",
    "MAX_DIMENSIONS",
    "EmbeddingError",
    "OpenAIEmbeddings",
    "embedding_scores",
    "fetch_embeddings",
    "read_class_labels",
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


def embedding_scores(answers: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Cosine similarity ``[n, C]`` of answer embeddings ``[n, D]`` with class
    embeddings ``[C, D]`` (a zero vector scores 0)."""
    a, c = np.asarray(answers, dtype=np.float64), np.asarray(classes, dtype=np.float64)
    if a.ndim != 2 or c.ndim != 2 or a.shape[1] != c.shape[1]:
        raise ShapeError(f"embeddings must be [n, D] and [C, D], got {a.shape} and {c.shape}")
    na = np.linalg.norm(a, axis=1, keepdims=True)
    nc = np.linalg.norm(c, axis=1, keepdims=True)
    return np.asarray((a / np.where(na > 0, na, 1.0)) @ (c / np.where(nc > 0, nc, 1.0)).T)


def read_class_labels(path: str | Path) -> list[str]:
    """Class names of an AudioSet ``class_labels_indices`` CSV (``index,mid,display_name``),
    in index order (SpatialSoundQA's ``class_labels_indices_subset.csv``: 355)."""
    import csv

    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "display_name" not in rows[0]:
        raise ParameterError(f"{path}: a CSV with a display_name column is required")
    return [str(r["display_name"]) for r in rows]
