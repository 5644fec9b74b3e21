"""The clip catalogue of the game: ground truth, audio files and model answers.

A clip is playable when its truth row has coordinates and its audio file
exists in the audio directory, found by
:func:`agl_fast.manifest.resolve_audio` (``{key}.mp3`` first, the layout of
``agl-fast agl1k fetch``, then ``mp3name``, or a curated table's ``path``
below the directory). Audio is always looked up by clip key in this
catalogue, never from a path a client sends.
"""

from __future__ import annotations

import csv
import json
import math
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..coords import parse_coordinate
from ..exceptions import InvalidCoordinatesError, ParameterError
from ..manifest import resolve_audio

AUDIO_TYPES = {
    ".mp3": "audio/mpeg",
    ".wav": "audio/wav",
    ".flac": "audio/flac",
    ".ogg": "audio/ogg",
    ".opus": "audio/ogg",
    ".m4a": "audio/mp4",
}
#: Suffixes of the prediction files read from a predictions directory.
PREDICTION_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")


@dataclass(frozen=True)
class ModelGuess:
    """One model's answer for one clip (coordinates may be missing: a refusal)."""

    model: str
    lat: float | None
    lon: float | None
    city: str | None
    country: str | None
    reasoning: str


@dataclass(frozen=True)
class Clip:
    """A playable clip: key, truth and the resolved audio file."""

    key: str
    lat: float
    lon: float
    city: str | None
    country: str | None
    continent: str | None
    title: str
    path: Path
    seconds: float | None


@dataclass
class Catalogue:
    """Playable clips by key, and model answers by key then model name."""

    clips: dict[str, Clip]
    models: dict[str, dict[str, ModelGuess]] = field(default_factory=dict)

    @property
    def model_names(self) -> list[str]:
        return sorted({m for per in self.models.values() for m in per})


def _text(v: Any) -> str | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    s = str(v).strip()
    return s or None


def coordinate_or_none(value: Any, axis: str) -> float | None:
    """A latitude or longitude in degrees, or None when it is missing or invalid.

    Parameters
    ----------
    value : object
        A number or text, checked by :func:`agl_fast.coords.parse_coordinate`.
    axis : {"latitude", "longitude"}
        Which coordinate.

    Returns
    -------
    float or None
        The degrees, or None where the coordinate rule refuses the value.
    """
    try:
        return parse_coordinate(value, axis)
    except InvalidCoordinatesError:
        return None


def _audio_cell(row: dict[str, Any]) -> str | None:
    """The row's audio cell: ``mp3name``, else a curated table's ``path``."""
    for column in ("mp3name", "path"):
        value = row.get(column)
        if isinstance(value, str) and value.strip():
            return value
    return None


def _clip(row: dict[str, Any], root: Path, found: Path | None) -> Clip | None:
    """The playable clip of a truth row whose audio resolved to ``found``,
    or None (no coordinates, no audio file)."""
    key = _text(row.get("key"))
    lat = coordinate_or_none(row.get("latitude"), "latitude")
    lon = coordinate_or_none(row.get("longitude"), "longitude")
    if key is None or found is None or lat is None or lon is None:
        return None
    path = found.resolve()
    # A manifest name never leaves the audio directory; a curated table's
    # path may lie deeper in it, never outside.
    if _text(row.get("mp3name")) is not None:
        inside = path.parent == root
    else:
        inside = path.is_relative_to(root)
    if not inside or not path.is_file():
        return None
    secs = row.get("mp3seconds")
    return Clip(
        key=key,
        lat=lat,
        lon=lon,
        city=_text(row.get("city")),
        country=_text(row.get("country")),
        continent=_text(row.get("continent")),
        title=_text(row.get("title")) or key,
        path=path,
        seconds=float(secs) if isinstance(secs, float) and math.isfinite(secs) else None,
    )


def _model_guess(model: str, rec: dict[str, Any]) -> ModelGuess:
    """A model's answer from a prediction record (coordinates parsed from the text if absent)."""
    from ..alm.parse import parse_answer

    text = _text(rec.get("model_output")) or ""
    lat, lon = rec.get("predicted_latitude"), rec.get("predicted_longitude")
    city, country = rec.get("predicted_city"), rec.get("predicted_country")
    if text and (_text(lat) is None or _text(lon) is None):
        parsed = parse_answer(text, _text(rec.get("finish_reason")))
        lat, lon = parsed.latitude, parsed.longitude
        city = city if _text(city) else parsed.city
        country = country if _text(country) else parsed.country
    return ModelGuess(
        model=model,
        lat=coordinate_or_none(lat, "latitude"),
        lon=coordinate_or_none(lon, "longitude"),
        city=_text(city),
        country=_text(country),
        reasoning=text,
    )


def _attach_models(cat: Catalogue, predictions: str | Path) -> None:
    """Add the answers of every prediction file in a directory to the catalogue."""
    from ..evaluate.readers import model_name, read_predictions

    pdir = Path(predictions)
    if not pdir.is_dir():
        raise ParameterError(f"predictions directory not found: {predictions}")
    for p in sorted(pdir.iterdir()):
        if p.suffix.lower() not in PREDICTION_SUFFIXES:
            continue
        model = model_name(p)
        pred, _ = read_predictions(p)
        for rec in pred.to_dict("records"):
            key = str(rec["question_id"])
            if key in cat.clips:
                cat.models.setdefault(key, {})[model] = _model_guess(model, rec)


def load_catalogue(
    truth: str | Path,
    audio_dir: str | Path,
    predictions: str | Path | None = None,
    *,
    strict: bool = False,
) -> Catalogue:
    """Read the truth manifest, keep clips whose audio exists, attach model answers.

    Parameters
    ----------
    truth : str or Path
        ``geoLocalization_schema.csv`` (AGL1K layout, read by
        :func:`agl_fast.evaluate.readers.read_truth`).
    audio_dir : str or Path
        Directory holding the clips under their key (``{key}.mp3``, the
        ``agl-fast agl1k fetch`` layout) or their ``mp3name``.
    predictions : str or Path, optional
        Directory of prediction files (``.json``, ``.jsonl``, ``.csv``,
        ``.parquet``) read with :func:`agl_fast.evaluate.readers.read_predictions`.
    strict : bool
        Refuse two keys resolving to one audio file (default: a warning).

    Returns
    -------
    Catalogue
        The playable clips by key and the model answers for them.

    Raises
    ------
    ParameterError
        When a directory is missing, no clip is playable, or ``strict`` and
        two keys share one file.
    """
    from ..evaluate.readers import read_truth

    root = Path(audio_dir).resolve()
    if not root.is_dir():
        raise ParameterError(f"audio directory not found: {audio_dir}")
    df = read_truth(truth)
    clips: dict[str, Clip] = {}
    rows = df.to_dict("records")
    names = [_audio_cell(r) for r in rows]
    found = resolve_audio([str(r["key"]) for r in rows], names, root, strict=strict)
    for row, path in zip(rows, found, strict=True):
        clip = _clip(row, root, path)
        if clip is not None:
            clips[clip.key] = clip
    if not clips:
        raise ParameterError(
            f"no playable clip: none of the {len(df)} truth rows has coordinates and an "
            f"audio file in {root}"
        )
    cat = Catalogue(clips=clips)
    if predictions is not None:
        _attach_models(cat, predictions)
    return cat


# (key, lat, lon, city, country, continent, title, base Hz, model guess lat/lon)
_DEMO = [
    ("demo_harbour", 43.2965, 5.3698, "Marseille", "France", "Europe", "Harbour bells", 440.0),
    ("demo_market", 6.5244, 3.3792, "Lagos", "Nigeria", "Africa", "Market drums", 196.0),
    ("demo_temple", 35.0116, 135.7681, "Kyoto", "Japan", "Asia", "Temple chimes", 523.25),
    ("demo_forest", -3.4653, -62.2159, "Manaus", "Brazil", "South America", "Rainforest", 880.0),
    (
        "demo_street",
        40.7128,
        -74.006,
        "New York",
        "United States",
        "North America",
        "Street",
        330.0,
    ),
]
_DEMO_MODELS = {
    "demo-echo": [
        (48.86, 2.35, "Paris", "France"),
        (9.06, 7.49, "Abuja", "Nigeria"),
        (35.68, 139.69, "Tokyo", "Japan"),
        (-12.05, -77.04, "Lima", "Peru"),
        (41.88, -87.63, "Chicago", "United States"),
    ],
    "demo-prior": [(51.51, -0.13, "London", "United Kingdom")] * 5,
}


def _write_tone(path: Path, base: float, seconds: float = 6.0, sr: int = 16000) -> None:
    t = np.arange(int(seconds * sr)) / sr
    rng = np.random.default_rng(int(base))
    y = 0.25 * np.sin(2 * np.pi * base * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 0.5 * t))
    y += 0.05 * rng.standard_normal(t.size)
    pcm = (np.clip(y, -1, 1) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.tobytes())


def write_demo(root: str | Path) -> tuple[Path, Path, Path]:
    """Write a small synthetic demo set; returns ``(truth_csv, audio_dir, predictions_dir)``.

    Five short synthesized clips with made-up but plausible recording places,
    a truth CSV in the AGL1K layout and two toy "models" (JSONL answers with
    reasoning text), so that ``agl-fast serve --demo`` runs on a fresh machine.
    """
    from ..evaluate.readers import TRUTH_COLUMNS

    root = Path(root)
    audio, preds = root / "audio", root / "predictions"
    audio.mkdir(parents=True, exist_ok=True)
    preds.mkdir(parents=True, exist_ok=True)
    truth = root / "geoLocalization_schema.csv"
    with truth.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(TRUTH_COLUMNS)
        for key, lat, lon, city, country, cont, title, base in _DEMO:
            _write_tone(audio / f"{key}.wav", base)
            row: dict[str, object] = dict.fromkeys(TRUTH_COLUMNS, "")
            row.update(
                key=key,
                short_key=key,
                latitude=lat,
                longitude=lon,
                altitude=0,
                title=title,
                mp3name=f"{key}.wav",
                mp3seconds=6.0,
                city=city,
                country=country,
                continent=cont,
                human_sounds=0.0,
            )
            w.writerow([row[c] for c in TRUTH_COLUMNS])
    for model, answers in _DEMO_MODELS.items():
        with (preds / f"{model}_seed_0.jsonl").open("w", encoding="utf-8") as fh:
            for (key, *_), (lat, lon, city, country) in zip(_DEMO, answers, strict=True):
                text = (
                    f"The timbre suggests a busy place near {city}. "
                    f"Answer: {city}, {country} ({lat}, {lon})."
                )
                fh.write(
                    json.dumps(
                        {
                            "question_id": key,
                            "predicted_latitude": lat,
                            "predicted_longitude": lon,
                            "predicted_city": city,
                            "predicted_country": country,
                            "model_output": text,
                            "finish_reason": "stop",
                        }
                    )
                    + "\n"
                )
    return truth, audio, preds
