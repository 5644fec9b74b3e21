"""End to end in a real headless browser (Debian chromium + chromedriver, Selenium).

A phone-sized window plays a whole round against ``agl-fast serve --demo``:
the audio plays and seeks, one guess is clicked on the map and one placed
with the keyboard, each answer shows the distance and the model table, and
the round ends on the leaderboard. The final screen is saved as
``target/test-artifacts/game-round.png`` (or under ``$AGL_FAST_ARTIFACTS``).
"""

from __future__ import annotations

import shutil

import pytest

from _game import ARTIFACTS, serve

webdriver = pytest.importorskip("selenium.webdriver")
pytest.importorskip("starlette")

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="needs Debian chromium and chromium-driver (scripts/test.sh installs them)",
)


@pytest.fixture
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--mute-audio",
        "--autoplay-policy=no-user-gesture-required",
    ):
        opts.add_argument(arg)
    # a phone: 412 x 915 CSS px, touch
    opts.add_experimental_option(
        "mobileEmulation", {"deviceMetrics": {"width": 412, "height": 915, "pixelRatio": 2.0}}
    )
    drv = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=DRIVER))
    drv.set_page_load_timeout(30)
    try:
        yield drv
    finally:
        drv.quit()


def _visible(drv, css, timeout=15):
    return WebDriverWait(drv, timeout).until(
        EC.visibility_of_element_located((By.CSS_SELECTOR, css))
    )


def _text_in(drv, css, text, timeout=15):
    WebDriverWait(drv, timeout).until(
        EC.text_to_be_present_in_element((By.CSS_SELECTOR, css), text)
    )


def test_round_in_a_phone_sized_browser(browser, tmp_path):
    drv = browser
    db = tmp_path / "e2e.sqlite"
    with serve(f"sqlite:///{db}", "--demo", "--round-size", "2") as base:
        drv.get(base + "/")
        _text_in(drv, "#status", "Clip 1 of 2")
        assert (
            drv.execute_script("return document.querySelectorAll('#countries path').length") > 150
        )
        inner = drv.execute_script("return window.innerWidth")
        width = drv.execute_script("return document.documentElement.scrollWidth")
        assert inner == 412 and width <= inner, f"page is {width} px wide on a {inner} px screen"

        # play the clip streamed from the server, then seek into it
        drv.execute_script("document.getElementById('audio').play()")
        WebDriverWait(drv, 15).until(
            lambda d: d.execute_script(
                "const a=document.getElementById('audio');return !a.paused && a.currentTime > 0.2"
            )
        )
        drv.execute_script("const a=document.getElementById('audio'); a.currentTime = 4.5;")
        WebDriverWait(drv, 15).until(
            lambda d: d.execute_script("return document.getElementById('audio').currentTime >= 4.5")
        )
        assert drv.execute_script(
            "return document.getElementById('audio').duration"
        ) == pytest.approx(6.0, abs=0.05)

        # clip 1: tap on the map (somewhere in Europe), submit
        svg = drv.find_element(By.ID, "map")
        assert not drv.find_element(By.ID, "submit").is_enabled()
        w, h = svg.size["width"], svg.size["height"]
        ActionChains(drv).move_to_element_with_offset(
            svg, int(w * 10 / 360), int(-h * 45 / 180)
        ).click().perform()
        _text_in(drv, "#coords", "Your guess")
        drv.find_element(By.ID, "submit").click()
        _visible(drv, "#result")
        _text_in(drv, "#answer", "km away")
        rows = drv.find_elements(By.CSS_SELECTOR, "#models tbody tr")
        assert [r.text.split()[0] for r in rows] == ["demo-echo", "demo-prior"]
        assert "GeoScore" in drv.find_element(By.ID, "answer").text
        assert drv.find_elements(By.CSS_SELECTOR, "#overlay .truth")
        _text_in(drv, "#score", "Round score:")

        # clip 2 with the keyboard only: Enter on "Next", arrows + Enter on the map, Tab to Submit
        nxt = drv.find_element(By.ID, "next")
        assert drv.switch_to.active_element == nxt
        nxt.send_keys(Keys.ENTER)
        _text_in(drv, "#status", "Clip 2 of 2")
        assert drv.switch_to.active_element == svg
        svg.send_keys(Keys.ARROW_UP, Keys.ARROW_UP, Keys.ARROW_RIGHT, Keys.SHIFT + Keys.ARROW_RIGHT)
        _text_in(drv, "#coords", "Cursor: 10.00°N, 6.00°E")
        svg.send_keys(Keys.ENTER)
        _text_in(drv, "#coords", "Your guess: 10.00°N, 6.00°E")
        ActionChains(drv).send_keys(Keys.TAB).perform()
        assert drv.switch_to.active_element.get_attribute("id") == "submit"
        drv.switch_to.active_element.send_keys(Keys.ENTER)

        # round over: the leaderboard of players and models on these clips
        _visible(drv, "#board")
        names = [
            r.find_elements(By.TAG_NAME, "td")[1].text
            for r in drv.find_elements(By.CSS_SELECTOR, "#leaders tbody tr")
        ]
        assert "you" in names and "demo-echo (model)" in names and "demo-prior (model)" in names
        _text_in(drv, "#status", "Round complete")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "game-round.png"
        drv.execute_script("window.scrollTo(0, 0)")
        drv.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
    import sqlite3

    with sqlite3.connect(db) as con:
        got = con.execute(
            "SELECT round(latitude, 6), round(longitude, 6) FROM guesses ORDER BY id"
        ).fetchall()
    assert len(got) == 2 and got[1] == (10.0, 6.0)
    assert 35 < got[0][0] < 55 and 0 < got[0][1] < 20
