"""The curation report of the mixed corpus (``test_report.curated_demo``) in
a real headless browser (Debian chromium + chromedriver, Selenium): every
figure is decoded and drawn, every file that did not pass is in the table,
the table sorts, and passed and failed clips are both visible on the map,
over coastlines. The page is saved as a screenshot,
``target/test-artifacts/curation-report.png`` (or under
``$AGL_FAST_ARTIFACTS``): a 64-colour PNG of the top of the page, the
image of ``docs/curation-report.md``."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from _game import ARTIFACTS

webdriver = pytest.importorskip("selenium.webdriver")
pytest.importorskip("matplotlib")
Image = pytest.importorskip("PIL.Image")

from selenium.webdriver.common.by import By  # noqa: E402

from agl_fast.report import OUTCOMES, write_report  # noqa: E402
from test_report import NO_COORDINATES, OUT_OF_RANGE, SAME_PLACE, curated_demo  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="needs Debian chromium and chromium-driver (scripts/test.sh installs them)",
)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return curated_demo(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def drv(out: Path) -> Iterator[Any]:
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1100,1500", "--force-device-scale-factor=1"):  # fmt: skip
        opts.add_argument(arg)
    d = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=DRIVER))
    try:
        d.set_page_load_timeout(30)
        d.get(write_report(out).resolve().as_uri())
        yield d
    finally:
        d.quit()


def _outcomes(out: Path) -> dict[str, str]:
    rows = pq.read_table(out / "curated.parquet").to_pylist()
    return {
        r["key"]: "failed" if r["error_type"] else "passed" if r["passed"] else "rejected"
        for r in rows
    }


def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def test_every_figure_renders(drv: Any) -> None:
    figures = drv.find_elements(By.CSS_SELECTOR, ".figures figure")
    expected = int(drv.find_element(By.CSS_SELECTOR, ".figures").get_attribute("data-count"))
    ids = [f.get_attribute("id") for f in figures]
    assert len(figures) == expected and {"failures", "dist-rms_dbfs", "dist-flatness"} <= set(ids)
    for fig in figures:
        img = fig.find_element(By.TAG_NAME, "img")
        drawn = drv.execute_script(
            "const i = arguments[0];"
            "return i.complete && i.naturalWidth > 0 && i.getBoundingClientRect().width > 0;",
            img,
        )
        assert drawn, fig.get_attribute("id")
    rows = drv.find_elements(By.CSS_SELECTOR, "#summary tr")
    assert any(r.text.startswith("passed") for r in rows)


def test_every_file_that_did_not_pass_is_listed_and_the_table_sorts(drv: Any, out: Path) -> None:
    kinds = _outcomes(out)
    want = sorted((k, o) for k, o in kinds.items() if o != "passed")
    assert len(want) >= 5

    def table() -> list[list[str]]:
        rows = drv.find_elements(By.CSS_SELECTOR, "#failed-files tbody tr")
        return [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in rows]

    assert sorted((r[0], r[1]) for r in table()) == want
    assert all(r[2] for r in table())  # every row gives a reason
    heads = drv.find_elements(By.CSS_SELECTOR, "#failed-files th button")
    assert [h.text for h in heads] == ["file", "outcome", "reason", "detail", "duration (s)"]
    heads[4].click()
    durations = [r[4] for r in table()]
    numbers = [float(d) for d in durations if d]
    assert numbers == sorted(numbers) and durations[: len(numbers)] == [f"{x:.2f}" for x in numbers]
    assert all(d == "" for d in durations[len(numbers) :])  # empty cells last
    heads[4].click()
    assert [float(d) for d in (r[4] for r in table()) if d] == sorted(numbers, reverse=True)
    heads[0].click()
    files = [r[0] for r in table()]
    assert files == sorted(files)
    th = drv.find_elements(By.CSS_SELECTOR, "#failed-files th")
    assert (
        th[0].get_attribute("aria-sort") == "ascending" and th[4].get_attribute("aria-sort") is None
    )
    heads[0].click()
    assert [r[0] for r in table()] == sorted(files, reverse=True)


def test_passed_and_failed_clips_are_visible_on_the_map_over_coastlines(
    drv: Any, out: Path
) -> None:
    kinds = _outcomes(out)
    svg = drv.find_element(By.ID, "map-svg")
    drv.execute_script("arguments[0].scrollIntoView()", svg)
    land = drv.find_elements(By.CSS_SELECTOR, "#map-svg .land path")
    assert len(land) == 177
    for outcome in OUTCOMES:
        keys = {
            c.get_attribute("data-key")
            for c in drv.find_elements(By.CSS_SELECTOR, f"#map-svg .points.{outcome} circle")
        }
        assert keys == {
            k for k, o in kinds.items() if o == outcome and k not in (NO_COORDINATES, OUT_OF_RANGE)
        }

    def on_top(key: str) -> Any:
        """The element the browser shows at the centre of ``key``'s dot."""
        return drv.execute_script(
            "const c = document.querySelector(`circle[data-key='${arguments[0]}']`);"
            "const r = c.getBoundingClientRect();"
            "return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);",
            key,
        )

    # a passed and a failed clip recorded at one spot: the passed one is on top
    passed_key, failed_key = SAME_PLACE
    assert kinds[passed_key] == "passed" and kinds[failed_key] == "failed"
    assert on_top(passed_key).get_attribute("data-key") == passed_key
    # every other dot is seen where it is drawn
    for key, outcome in kinds.items():
        if key in (*SAME_PLACE, NO_COORDINATES, OUT_OF_RANGE):
            continue
        assert on_top(key).get_attribute("data-key") == key, (key, outcome)
    # the rendered pixels: land, sea, and both colours of dots
    px = np.asarray(Image.open(io.BytesIO(svg.screenshot_as_png)).convert("RGB"), dtype=int)
    near = {
        name: int((np.abs(px - np.array(_rgb(color))).max(axis=-1) <= 12).sum())
        for name, color in {**OUTCOMES, "land": "#dcdcdc", "sea": "#eef4f8"}.items()
    }
    total = px.shape[0] * px.shape[1]
    assert near["land"] > 0.1 * total and near["sea"] > 0.3 * total
    assert near["passed"] > 50 and near["failed"] > 50
    legend = drv.find_elements(By.CSS_SELECTOR, "#map .legend li")
    assert [li.get_attribute("data-outcome") for li in legend] == [
        "passed", "rejected", "failed", "none",
    ]  # fmt: skip
    assert legend[3].text.startswith("without valid coordinates: 2 of ")
    drv.execute_script("window.scrollTo(0, 0)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = Image.open(io.BytesIO(drv.get_screenshot_as_png())).convert("RGB")
    shot.quantize(colors=64, method=Image.Quantize.FASTOCTREE).save(
        ARTIFACTS / "curation-report.png", optimize=True
    )
