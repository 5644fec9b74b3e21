"""Closed-set labelling of texts by a language model, through the query harness.

A :class:`LabelSet` names the allowed labels (one per item, or a set of
them). :func:`label_items` sends every item's prompt through an
:class:`~agl_fast.alm.runner.Engine` (same store, caching, resume, retries,
rate limits and budget as ``agl-fast query``), then validates each answer
against the set:

* the answer must hold a JSON object with ``"label"`` (single) or
  ``"labels"`` (a list, possibly empty), or, for a single label, be the bare
  label itself;
* a label is accepted when it equals an allowed one after folding case,
  spaces, hyphens and underscores (``over commitment`` is
  ``Over-Commitment``); anything else is *invalid*, never mapped to the
  nearest label.

An invalid or blocked answer is asked again (``attempts`` in all), with a
line that names the allowed labels appended to the prompt; each attempt is
its own cached request, so a rerun re-sends nothing already answered. What
is still invalid after the last attempt is recorded with ``labels = None``
and its status.

Statuses: ``ok``; ``no_json`` (nothing that reads as an answer);
``unknown_label`` (a label outside the set); ``blocked`` (empty or filtered
reply); ``error`` (no reply; see the store's ``error`` column).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..exceptions import ParameterError
from ..remote.store import cache_key
from .cost import estimate_tokens
from .judges import first_json_object
from .prompts import PromptTemplate
from .protocol import Reply
from .runner import Engine, Job

__all__ = ["LabelItem", "LabelResult", "LabelSet", "fold_label", "label_items", "read_overrides"]

#: Statuses of a labelled item.
STATUSES = ("ok", "no_json", "unknown_label", "blocked", "error")


def fold_label(s: str) -> str:
    """Case-, space-, hyphen- and underscore-insensitive form of a label."""
    return " ".join(re.sub(r"[-_]", " ", str(s)).split()).casefold()


@dataclass(frozen=True)
class LabelSet:
    """The allowed labels of a task; ``multi`` lets an item have several (or none)."""

    name: str
    classes: tuple[str, ...]
    multi: bool = False

    def __post_init__(self) -> None:
        folded = [fold_label(c) for c in self.classes]
        if not self.classes or len(set(folded)) != len(folded):
            raise ParameterError(
                f"label set {self.name!r} needs distinct labels, got {list(self.classes)}"
            )

    def canonical(self, label: object) -> str | None:
        """The allowed label ``label`` names (after folding), else None."""
        if not isinstance(label, str):
            return None
        want = fold_label(label)
        return next((c for c in self.classes if fold_label(c) == want), None)

    def validate(self, text: str | None) -> tuple[tuple[str, ...] | None, str]:
        """``(labels, status)`` of one answer text; ``labels`` is None unless ``ok``."""
        if text is None or not text.strip():
            return None, "blocked"
        obj = first_json_object(text)
        if obj is None:
            bare = text.strip().strip("`'\".").strip()
            if not self.multi and self.canonical(bare) is not None:
                return (self.canonical(bare) or "",), "ok"
            return None, "no_json"
        field = "labels" if self.multi else "label"
        value = obj.get(field)
        if value is None:
            return None, "no_json"
        values = value if self.multi else [value]
        if not isinstance(values, list):
            return None, "unknown_label"
        out: list[str] = []
        for v in values:
            c = self.canonical(v)
            if c is None:
                return None, "unknown_label"
            if c not in out:
                out.append(c)
        return tuple(out), "ok"

    def reminder(self) -> str:
        """The line appended to a prompt whose previous answer was invalid."""
        listed = "; ".join(self.classes)
        shape = '{"labels": [...]}' if self.multi else '{"label": "..."}'
        return (
            f"\n\nYour previous answer could not be read. Answer with the JSON object {shape} "
            f"only, using exactly these labels: {listed}."
        )

    def parse_override(self, value: str) -> tuple[str, ...]:
        """Labels of a human override cell (``;``-separated for a multi-label set)."""
        parts = [p.strip() for p in value.split(";")] if self.multi else [value.strip()]
        parts = [p for p in parts if p]
        if not self.multi and len(parts) != 1:
            raise ParameterError(
                f"override label must be one of {list(self.classes)}, got {value!r}"
            )
        out = []
        for p in parts:
            c = self.canonical(p)
            if c is None:
                raise ParameterError(f"override label {p!r} is not one of {list(self.classes)}")
            out.append(c)
        return tuple(dict.fromkeys(out))


@dataclass
class LabelItem:
    """One text to label: its identity and the filled prompt."""

    key: str
    prompt: str


@dataclass
class LabelResult:
    """The validated outcome of one item."""

    key: str
    labels: tuple[str, ...] | None
    status: str
    attempts: int
    raw_text: str | None
    source: str = "model"


def _classify(label_set: LabelSet):  # type: ignore[no-untyped-def]
    def classify(reply: Reply) -> str:
        labels, status = label_set.validate(reply.text)
        if status == "blocked":
            return "blocked"
        return "ok" if labels is not None else "unparseable"

    return classify


def _job(
    item: LabelItem, attempt: int, label_set: LabelSet, provider: str, model: str,
    template: PromptTemplate, params: dict[str, Any],
) -> Job:  # fmt: skip
    prompt = item.prompt + (label_set.reminder() if attempt > 1 else "")
    h = hashlib.sha256(f"{prompt}\x1fattempt={attempt}".encode()).hexdigest()
    pt, _ = estimate_tokens(prompt, 0.0, 0.0)
    return Job(
        item.key, cache_key(provider, model, template.sha256, h, params), prompt, h,
        est_prompt_tokens=pt,
    )  # fmt: skip


def label_items(
    engine: Engine,
    items: Sequence[LabelItem],
    label_set: LabelSet,
    template: PromptTemplate,
    attempts: int = 2,
) -> list[LabelResult]:
    """Label ``items`` with ``engine``'s model; see the module docs.

    Parameters
    ----------
    engine : Engine
        Provider, model, store and flow control; its ``classify`` is replaced
        by the label set's validation.
    items : sequence of LabelItem
        Keys must be distinct.
    label_set : LabelSet
        The allowed labels.
    template : PromptTemplate
        The template the prompts were filled from (its hash enters the cache key).
    attempts : int
        Requests per item at most (>= 1); later ones carry the reminder line.

    Returns
    -------
    list of LabelResult
        One per item, in order.
    """
    if attempts < 1:
        raise ParameterError(f"attempts must be >= 1, got attempts={attempts}")
    keys = [it.key for it in items]
    if len(set(keys)) != len(keys):
        raise ParameterError("label items need distinct keys")
    engine.classify = _classify(label_set)
    provider, model, params = engine.provider.name, engine.model, engine.params
    results: dict[str, LabelResult] = {}
    todo = list(items)
    n_jobs = 0
    for attempt in range(1, attempts + 1):
        jobs = [_job(it, attempt, label_set, provider, model, template, params) for it in todo]
        engine.run(jobs)
        n_jobs += len(jobs)
        engine.summary.n_jobs = n_jobs  # over every attempt, not the last one
        if engine.summary.stopped:
            attempts = attempt  # budget or auth: no further attempts
        again = []
        for it, jb in zip(todo, jobs, strict=True):
            row = engine.store.get(jb.cache_key)
            if row is None:
                results[it.key] = LabelResult(it.key, None, "error", attempt - 1, None)
                continue
            if row["answer_class"] == "error":
                labels, status = None, "error"
            else:
                labels, status = label_set.validate(row["raw_text"])
            results[it.key] = LabelResult(it.key, labels, status, attempt, row["raw_text"])
            if status in ("no_json", "unknown_label", "blocked") and attempt < attempts:
                again.append(it)
        todo = again
        if not todo:
            break
    return [results[k] for k in keys]


def read_overrides(path: str, label_set: LabelSet) -> dict[tuple[str, str | None], tuple[str, ...]]:
    """Human labels from a CSV with ``key`` and ``label`` columns (``model`` optional).

    Returns ``{(key, model or None): labels}``. Every label is checked
    against ``label_set``; a bad one raises :class:`ParameterError` naming
    its line.
    """
    import csv

    try:
        fh = open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise ParameterError(f"cannot read overrides {path!r}: {exc.strerror}") from None
    with fh:
        reader = csv.DictReader(fh)
        cols = reader.fieldnames or []
        if "key" not in cols or "label" not in cols:
            raise ParameterError(f"{path}: overrides need 'key' and 'label' columns, got {cols}")
        out: dict[tuple[str, str | None], tuple[str, ...]] = {}
        for line, rec in enumerate(reader, start=2):
            key = (rec.get("key") or "").strip()
            if not key:
                raise ParameterError(f"{path}:{line}: empty key")
            try:
                labels = label_set.parse_override(rec.get("label") or "")
            except ParameterError as exc:
                raise ParameterError(f"{path}:{line}: {exc}") from None
            model = (rec.get("model") or "").strip() or None
            out[(key, model)] = labels
    return out
