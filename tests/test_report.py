"""The curation report: figures drawn from a real curate run of a mixed
corpus (the demo's files, plus excerpts of the real recordings made by
ffmpeg when it is installed) through a manifest with good, missing and
out-of-range coordinates; the self-contained page; the dependency check
before the job; where the demo's output went."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("matplotlib")

from agl_fast.cli import main
from agl_fast.pipeline.demo import write_demo_corpus
from agl_fast.report import (
    failed_rows,
    failure_reasons,
    plot_coordinates,
    plot_distribution,
    plot_failure_reasons,
    threshold_lines,
    write_report,
)
from conftest import REAL_MP3

#: Manifest keys given special coordinates (the rest are spread over the globe).
SAME_PLACE = ("site0/clip00.wav", "bad/empty.wav")  # a passed and a failed clip, one spot
PARIS = (48.85, 2.35)
NO_COORDINATES = "site2/clip07.wav"
OUT_OF_RANGE = "site1/clip05.wav"  # latitude 200, longitude 500


def _ffmpeg_files(corpus: Path) -> None:
    """A 5 s FLAC excerpt of a real recording, and an MP3 excerpt cut short."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None or not REAL_MP3:
        return
    real = corpus / "real"
    real.mkdir()
    for args in (
        ["-ss", "20", "-t", "5", "-i", str(REAL_MP3[0]), str(real / "excerpt.flac")],
        ["-ss", "20", "-t", "8", "-i", str(REAL_MP3[1]), str(real / "whole.mp3")],
    ):
        subprocess.run([ffmpeg, "-v", "error", "-y", *args], check=True, timeout=120)
    whole = real / "whole.mp3"
    (real / "cut.mp3").write_bytes(whole.read_bytes()[:2000])
    whole.unlink()


def curated_demo(root: Path) -> Path:
    """``curate`` of the mixed corpus through a manifest giving most clips a
    place; returns the output directory."""
    corpus = write_demo_corpus(root / "corpus")
    _ffmpeg_files(corpus)
    files = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*") if p.is_file())
    with open(root / "manifest.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["key", "path", "latitude", "longitude"])
        for i, p in enumerate(files):
            lat, lon = -60 + 8 * i, -170 + 21 * i
            if p in SAME_PLACE:
                lat, lon = PARIS
            row = [p, p, lat, lon]
            if p == NO_COORDINATES:
                row = [p, p, "", ""]
            elif p == OUT_OF_RANGE:
                row = [p, p, 200, 500]
            w.writerow(row)
    out = root / "out"
    argv = ["curate", "--manifest", str(root / "manifest.csv"), "--audio-dir", str(corpus)]
    assert main([*argv, "--out", str(out), "-q"]) == 0
    return out


@pytest.fixture(scope="module")
def curated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return curated_demo(tmp_path_factory.mktemp("report"))


def _outcomes(out: Path) -> dict[str, str]:
    """key -> failed / rejected / passed, from the table's own columns."""
    t = pq.read_table(out / "curated.parquet").to_pylist()
    return {
        r["key"]: "failed" if r["error_type"] else "passed" if r["passed"] else "rejected"
        for r in t
    }


def test_failure_reasons_agree_with_the_run_summary(curated: Path) -> None:
    table = pq.read_table(curated / "curated.parquet")
    counts = json.loads((curated / "summary.json").read_text())["counts"]
    want = {**counts["errors_by_type"], **counts["rejected_by_reason"]}
    assert dict(failure_reasons(table)) == want


def test_map_draws_passed_clips_above_the_others_on_coastlines(curated: Path) -> None:
    from matplotlib.figure import Figure

    table = pq.read_table(curated / "curated.parquet")
    counts = json.loads((curated / "summary.json").read_text())["counts"]
    kinds = _outcomes(curated)
    on_map = {k: v for k, v in kinds.items() if k not in (NO_COORDINATES, OUT_OF_RANGE)}
    ax = Figure().add_subplot()
    assert plot_coordinates(table, ax=ax) is ax
    # the shipped Natural Earth outlines under the points
    assert len(ax.patches) > 200 and max(p.get_zorder() for p in ax.patches) == 1
    drawn = [(c.get_zorder(), len(c.get_offsets())) for c in ax.collections]
    want = [sum(v == k for v in on_map.values()) for k in ("failed", "rejected", "passed")]
    assert [n for _, n in drawn] == want
    assert [z for z, _ in drawn] == sorted(z for z, _ in drawn) and drawn[0][0] > 1
    labels = ax.get_legend().get_texts()
    rejected = counts["decoded"] - counts["passed"]
    assert [t.get_text() for t in labels] == [
        f"passed: {counts['passed']} ({want[2]} on the map)",
        f"rejected: {rejected} ({want[1]} on the map)",
        f"failed: {counts['failed']} ({want[0]} on the map)",
    ]
    assert ax.get_title() == f"2 of {table.num_rows} clips without valid coordinates"


def test_histograms_draw_the_limits_the_run_used(curated: Path) -> None:
    from matplotlib.figure import Figure

    summary = json.loads((curated / "summary.json").read_text())
    limits = threshold_lines(summary)
    # the defaults of a curate run, in the units of the drawn columns
    assert limits["rms"]["rms_floor"] == pytest.approx(-60.0)
    assert limits["flatness"] == {"flatness_ceiling": 0.5}
    assert limits["complexity"] == {"complexity_floor": 100.0}
    assert limits["clipping_ratio"] == {"clipping_ceiling": 0.001}
    assert limits["duration"]["max_duration"] == 600.0
    table = pq.read_table(curated / "curated.parquet")
    ax = Figure().add_subplot()
    plot_distribution(table, "complexity", thresholds=limits["complexity"], ax=ax)
    lines = [ln for ln in ax.get_lines() if ln.get_gid() == "threshold-complexity_floor"]
    assert len(lines) == 1 and list(lines[0].get_xdata()) == [100.0, 100.0]
    ax = Figure().add_subplot()
    plot_distribution(table, "duration", thresholds={"max_duration": 600.0, "min_duration": 0.5},
                      ax=ax)  # fmt: skip
    assert [ln.get_gid() for ln in ax.get_lines()] == ["threshold-min_duration", None]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "max_duration = 600 (off scale)" in texts and "min_duration = 0.5" in texts


def test_figures_draw_on_the_given_axes(curated: Path) -> None:
    from matplotlib.figure import Figure

    table = pq.read_table(curated / "curated.parquet")
    fig = Figure()
    ax = fig.add_subplot()
    assert plot_failure_reasons(table, ax=ax) is ax
    assert sorted(p.get_width() for p in ax.patches) == sorted(failure_reasons(table).values())
    ax = fig.add_subplot()
    assert plot_distribution(table, "rms_dbfs", ax=ax) is ax
    rms = [v for v in table.column("rms_dbfs").to_pylist() if v is not None]
    silent = sum(v == float("-inf") for v in rms)  # the demo's silent clip
    assert silent == 1
    assert sum(p.get_height() for p in ax.patches) == len(rms) - silent
    assert ax.get_title() == "1 infinite value(s) not shown"


def test_page_lists_every_file_that_did_not_pass(curated: Path) -> None:
    page = write_report(curated).read_text()
    kinds = _outcomes(curated)
    body = page.split("<table id='failed-files'", 1)[1].split("</table>", 1)[0]
    listed = re.findall(r"<tr class='(\w+)'><td>([^<]+)</td><td>\w+</td><td>([^<]*)</td>", body)
    assert sorted((k, o) for o, k, _ in listed) == sorted(
        (k, o) for k, o in kinds.items() if o != "passed"
    )
    assert all(reason for _, _, reason in listed)
    rows = {r["key"]: r for r in failed_rows(pq.read_table(curated / "curated.parquet"))}
    assert rows["bad/empty.wav"]["outcome"] == "failed"
    assert rows["bad/silent.wav"]["reason"].startswith("low_rms")
    assert math.isclose(rows["bad/silent.wav"]["duration"], 1.0)


def test_page_map_counts_agree_with_the_summary(curated: Path) -> None:
    page = write_report(curated).read_text()
    counts = json.loads((curated / "summary.json").read_text())["counts"]
    legend = dict(re.findall(r'<li data-outcome="(\w+)" data-count="(\d+)"', page))
    assert legend == {
        "passed": str(counts["passed"]),
        "rejected": str(counts["decoded"] - counts["passed"]),
        "failed": str(counts["failed"]),
        "none": "2",
    }
    svg = page.split('<svg id="map-svg"', 1)[1].split("</svg>", 1)[0]
    assert svg.count("<path ") == 177  # the shipped countries
    groups = re.findall(r'<g class="points (\w+)"[^>]*>(.*?)</g>', svg)
    # drawn in this order: passed last, on top
    assert [g for g, _ in groups] == ["failed", "rejected", "passed"]
    kinds = _outcomes(curated)
    for g, dots in groups:
        keys = re.findall(r'data-key="([^"]+)"', dots)
        assert sorted(keys) == sorted(
            k for k, o in kinds.items() if o == g and k not in (NO_COORDINATES, OUT_OF_RANGE)
        )


def test_page_is_self_contained(curated: Path) -> None:
    page = write_report(curated).read_text()
    ids = re.findall(r'<figure id="([^"]+)"><img', page)
    assert {"failures", "dist-rms_dbfs", "dist-duration", "dist-complexity"} <= set(ids)
    assert page.count("data:image/png;base64,") == len(ids)
    assert f"data-count='{len(ids)}'" in page and "<figure id='map'><svg" in page
    # nothing fetched from elsewhere
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)


def test_report_never_switches_the_matplotlib_backend(curated: Path) -> None:
    # a caller's backend (here "svg", as a notebook would have its own) stays
    code = (
        "import sys, matplotlib; matplotlib.use('svg'); "
        "from agl_fast.report import write_report; write_report(sys.argv[1]); "
        "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()"
    )
    subprocess.run([sys.executable, "-c", code, str(curated)], check=True)


#: ``agl-fast`` in a child where ``import matplotlib`` fails, as without the extra.
_NO_MATPLOTLIB = (
    "import sys; sys.modules['matplotlib'] = None; "
    "from agl_fast.cli import main; sys.exit(main(sys.argv[1:]))"
)


def test_missing_matplotlib_stops_curate_report_before_the_job(tmp_path: Path) -> None:
    corpus = write_demo_corpus(tmp_path / "corpus")
    out = tmp_path / "out"
    for argv in (["curate", str(corpus), "--out", str(out), "--report"],
                 ["curate", "--demo", "--report"], ["report", str(tmp_path)]):  # fmt: skip
        r = subprocess.run([sys.executable, "-c", _NO_MATPLOTLIB, *argv],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == (
            f"agl-fast: '{argv[0]}' needs the missing package matplotlib: "
            "pip install 'agl-fast[evaluate]'"
        )
        assert r.stdout == ""
    assert not out.exists()  # nothing was curated


def test_demo_prints_where_its_output_went(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "TMPDIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "agl_fast.cli", "curate", "--demo", "-q"],
                       capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    made = [p for p in tmp_path.iterdir() if p.name.startswith("agl-fast-demo-")]
    assert len(made) == 1
    out = made[0]
    assert f"output: {out.resolve()}" in r.stdout.splitlines()
    assert f"demo corpus: {(out / 'demo-corpus').resolve()}" in r.stdout.splitlines()
    assert pq.read_table(out / "curated.parquet").num_rows == 13
    assert (out / "demo-corpus" / "bad" / "empty.wav").is_file()
    r = subprocess.run([sys.executable, "-m", "agl_fast.cli", "curate", "--demo", "--report",
                        "--out", str(tmp_path / "mine")],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert f"output: {(tmp_path / 'mine').resolve()}" in lines
    assert any(line.split() == ["report.html", "the", "report", "page"] for line in lines)


def test_a_large_map_is_an_image(
    curated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agl_fast.report as report

    monkeypatch.setattr(report, "MAP_SVG_POINTS", 3)
    page = write_report(curated, tmp_path / "r.html").read_text()
    fig = page.split("<figure id='map'>", 1)[1].split("</figure>", 1)[0]
    assert fig.startswith('<img alt="where the clips were recorded" src="data:image/png;base64,')
    assert "<svg" not in page and "more than 3 clips" in fig
