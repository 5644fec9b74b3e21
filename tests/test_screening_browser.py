"""Screening five clips of a pool in a real headless browser, then selecting.

A curator opens ``/screen`` of ``agl-fast serve --screening-token`` (a real
server process on loopback, a real SQLite file), plays a clip, accepts or
rejects five clips with a note, leaves and comes back (the page resumes at
the first clip without a decision). ``agl-fast localizability select
--screening`` then leaves the rejected clips out and meets a target mix.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import wave

import numpy as np
import pytest

from _game import serve

webdriver = pytest.importorskip("selenium.webdriver")
pytest.importorskip("starlette")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from agl_fast import manifest as mf  # noqa: E402
from agl_fast.cli import main  # noqa: E402
from test_game_browser import CHROMIUM, DRIVER, browser  # noqa: E402, F401

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="needs Debian chromium and chromium-driver (scripts/test.sh installs them)",
)

TOKEN = "curator-0123456789abcdef"
# key -> (human_sounds, l_k): three speech and three non-speech clips
POOL = {
    "n1": (0.0, 2.8),
    "n2": (0.0, 1.8),
    "n3": (0.0, 1.5),
    "s1": (0.9, 3.0),
    "s2": (0.7, 2.5),
    "s3": (0.5, 2.0),
}
# what the curator decides, in the page's order (keys sorted); s3 stays open
SCREEN = [
    ("n1", "reject", "traffic only, no place cue"),
    ("n2", "accept", "surf and gulls"),
    ("n3", "accept", ""),
    ("s1", "reject", "music over the voices"),
    ("s2", "accept", "station announcement"),
]


def _write_pool(tmp_path):
    audio = tmp_path / "audio"
    audio.mkdir()
    t = np.arange(3 * 16000) / 16000
    for i, key in enumerate(POOL):
        y = (0.2 * np.sin(2 * np.pi * (220 + 40 * i) * t) * 32767).astype("<i2")
        with wave.open(str(audio / f"{key}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes(y.tobytes())
    pool = tmp_path / "scored.csv"
    with pool.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["key", "title", "latitude", "longitude", "mp3name", "mp3seconds",
                    "human_sounds", "l_k"])  # fmt: skip
        for i, (key, (hs, lk)) in enumerate(POOL.items()):
            w.writerow([key, f"clip {key}", 10.0 + i, 20.0 + i, f"{key}.wav", 3.0, hs, lk])
    return pool, audio


def _wait_text(drv, css, text, timeout=15):
    WebDriverWait(drv, timeout).until(
        EC.text_to_be_present_in_element((By.CSS_SELECTOR, css), text)
    )


def _decide(drv, key, decision, note):
    _wait_text(drv, "#meta", key)
    box = drv.find_element(By.ID, "note")
    box.clear()
    if note:
        box.send_keys(note)
    drv.find_element(By.ID, decision).click()


def test_screen_five_clips_then_select_honours_them(browser, tmp_path, capsys):  # noqa: F811
    drv = browser
    pool, audio = _write_pool(tmp_path)
    db = tmp_path / "game.sqlite"
    url = f"sqlite:///{db}"
    extra = ["--truth", str(pool), "--audio-dir", str(audio), "--screening-token", TOKEN]
    with serve(url, *extra) as base:
        # without the token the page says where to get it, and the API refuses
        drv.get(base + "/screen")
        _wait_text(drv, "#status", "carries the token")
        drv.get("about:blank")  # a new fragment alone would not load the page again
        drv.get(base + "/screen#token=" + TOKEN)
        _wait_text(drv, "#status", "Clip 1 of 6")
        _wait_text(drv, "#progress", "0 of 6 screened")
        # the curator listens
        drv.execute_script("document.getElementById('audio').play()")
        WebDriverWait(drv, 15).until(
            lambda d: d.execute_script(
                "const a=document.getElementById('audio');return !a.paused && a.currentTime > 0.2"
            )
        )
        for i, (key, decision, note) in enumerate(SCREEN[:4]):
            _decide(drv, key, decision, note)
            _wait_text(drv, "#progress", f"{i + 1} of 6 screened")
        # leave and come back: the page resumes at the first open clip
        drv.get("about:blank")
        drv.get(base + "/screen#token=" + TOKEN)
        _wait_text(drv, "#progress", "4 of 6 screened: 2 accepted, 2 rejected")
        _wait_text(drv, "#status", "Clip 5 of 6")
        assert drv.find_element(By.ID, "note").get_attribute("value") == ""
        key, decision, note = SCREEN[4]
        _decide(drv, key, decision, note)
        _wait_text(drv, "#progress", "5 of 6 screened: 3 accepted, 2 rejected")
        rows = {
            r.find_elements(By.TAG_NAME, "td")[0].text: [
                td.text for td in r.find_elements(By.TAG_NAME, "td")[1:]
            ]
            for r in drv.find_elements(By.CSS_SELECTOR, "#decisions tbody tr")
        }
        assert rows["n1"] == ["reject", "traffic only, no place cue"]
        assert rows["s3"] == ["—", ""]
    with sqlite3.connect(db) as con:
        stored = dict(con.execute("SELECT clip_key, decision FROM screening").fetchall())
        notes = dict(con.execute("SELECT clip_key, note FROM screening").fetchall())
    assert stored == {k: d for k, d, _ in SCREEN}
    assert notes["s1"] == "music over the voices"

    def select(*flags):
        out = tmp_path / "bench.csv"
        capsys.readouterr()
        code = main(["localizability", "select", "--manifest", str(pool), "--out", str(out),
                     *flags])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 0, err
        return mf.read_manifest(out).column("key").to_pylist(), json.loads(err.splitlines()[0])

    # without screening the most localizable clips of each side win
    keys, _ = select("--counts", "2,1")
    assert sorted(keys) == ["n1", "s1", "s2"]
    # with it the rejected ones (s1, n1) are out and the mix still holds
    keys, rep = select("--counts", "2,1", "--screening", url)
    assert sorted(keys) == ["n2", "s2", "s3"] and rep["screened_out"] == 2
    assert rep["short"] == {"speech": 0, "nonspeech": 0}
    # a share: 2 speech and 2 non-speech remain, 0.5 of 4
    keys, rep = select("--speech-share", "0.5", "--screening", url)
    assert sorted(keys) == ["n2", "n3", "s2", "s3"]
    # only accepted clips: s3 is still open, so one speech clip is missing
    keys, rep = select("--counts", "2,1", "--screening", url, "--accepted-only")
    assert sorted(keys) == ["n2", "s2"] and rep["short"] == {"speech": 1, "nonspeech": 0}
