"""``agl-fast split``: train / validation / test splits by duplicate group
(no group crosses a split) and by place (the splits' sites at least
``--min-km`` apart), and ``localizability select`` one clip per group.

The tables are built here with known groups and sites; the distances the
tests check are measured with :func:`agl_fast.geo.haversine` over every
pair of rows in different splits.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from agl_fast import manifest as mf
from agl_fast.cli import main
from agl_fast.exceptions import ParameterError
from agl_fast.geo import haversine
from agl_fast.localizability.tables import select_benchmark
from agl_fast.pipeline.split import (
    SPLIT_NAMES,
    check_fractions,
    split_by_group,
    split_by_place,
)


def _grouped(n: int = 400, seed: int = 0) -> pa.Table:
    """``n`` clips, a third of them in duplicate groups of 2 to 5 clips."""
    rng = np.random.default_rng(seed)
    groups: list[int | None] = [None] * n
    i, g = 0, 0
    while i < n // 3:
        size = int(rng.integers(2, 6))
        for j in range(i, min(i + size, n)):
            groups[j] = g
        i, g = i + size, g + 1
    order = rng.permutation(n)
    return pa.table(
        {
            "key": [f"c{k:04d}" for k in range(n)],
            "duration": rng.uniform(5, 60, n),
            "duplicate_group": pa.array([groups[k] for k in order], pa.int64()),
        }
    )


def _members(table: pa.Table) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, g in enumerate(table.column("duplicate_group").to_pylist()):
        if g is not None:
            out.setdefault(g, []).append(i)
    return out


def test_split_by_group_no_group_crosses() -> None:
    t = _grouped()
    split, counts = split_by_group(t, (0.7, 0.15, 0.15), seed=3)
    labels = split.to_pylist()
    assert set(labels) == set(SPLIT_NAMES)
    for rows in _members(t).values():
        assert len({labels[i] for i in rows}) == 1
    # whole units of at most 5 rows: each split within 5 rows of its share
    for name, share in zip(SPLIT_NAMES, (0.7, 0.15, 0.15), strict=True):
        assert abs(counts["rows"][name] - share * t.num_rows) <= 5
    assert counts["empty"] == []
    # the seed decides, nothing else
    assert split_by_group(t, (0.7, 0.15, 0.15), seed=3)[0].to_pylist() == labels
    assert split_by_group(t, (0.7, 0.15, 0.15), seed=4)[0].to_pylist() != labels


def test_split_refuses_ungrouped_tables_and_bad_fractions() -> None:
    t = _grouped(20)
    with pytest.raises(ParameterError, match="agl-fast dedup"):
        split_by_group(t.drop_columns(["duplicate_group"]))
    for bad in ((0.5, 0.5), (0.8, 0.3, -0.1), (0.5, 0.2, 0.2), (np.nan, 0.5, 0.5)):
        with pytest.raises(ParameterError, match="fractions"):
            check_fractions(bad)


def _places(seed: int = 0) -> pa.Table:
    """Clips at 4 sites in each of 4 far-apart regions (``k % 4``); sites of a
    region lie within about 45 km of each other, regions thousands of km
    apart; one recording duplicated across regions 2 and 3 (a re-upload
    placed elsewhere), one within region 0, and three clips without
    coordinates."""
    rng = np.random.default_rng(seed)
    centres = [(48.0, 11.0), (-33.9, 18.4), (35.7, 139.7), (40.7, -74.0)]
    lat, lon = [], []
    for k in range(120):
        c = centres[k % 4]
        site = (k // 4) % 4
        lat.append(c[0] + 0.1 * site + rng.uniform(-0.01, 0.01))
        lon.append(c[1] + 0.1 * site + rng.uniform(-0.01, 0.01))
    lat_c = pa.array(lat, pa.float64()).to_pylist()
    lon_c = pa.array(lon, pa.float64()).to_pylist()
    for k in (5, 6, 7):
        lat_c[k] = lon_c[k] = None
    groups = [None] * 120
    groups[10], groups[11] = 0, 0  # regions 2 and 3: one recording
    groups[20], groups[24] = 1, 1  # region 0
    return pa.table(
        {
            "key": [f"p{k:03d}" for k in range(120)],
            "latitude": pa.array(lat_c, pa.float64()),
            "longitude": pa.array(lon_c, pa.float64()),
            "duplicate_group": pa.array(groups, pa.int64()),
        }
    )


def _cross_split_min_km(t: pa.Table, labels: list[str | None]) -> float:
    lat = np.array([np.nan if v is None else v for v in t.column("latitude").to_pylist()])
    lon = np.array([np.nan if v is None else v for v in t.column("longitude").to_pylist()])
    best = np.inf
    for i in range(t.num_rows):
        if labels[i] is None:
            continue
        other = np.array([labels[j] not in (None, labels[i]) for j in range(t.num_rows)])
        if other.any():
            d = haversine(np.full(other.sum(), lat[i]), np.full(other.sum(), lon[i]),
                          lat[other], lon[other])  # fmt: skip
            best = min(best, float(d.min()))
    return best


def test_split_by_place_keeps_min_distance() -> None:
    t = _places()
    split, counts = split_by_place(t, (0.34, 0.33, 0.33), min_km=100, seed=0)
    labels = split.to_pylist()
    assert counts["unplaced"] == 3
    assert [labels[k] for k in (5, 6, 7)] == [None, None, None]
    assert counts["empty"] == []
    assert _cross_split_min_km(t, labels) >= 100
    for rows in _members(t).values():
        assert len({labels[i] for i in rows}) == 1
    # regions 2 and 3 share a recording: one split
    assert counts["units"] == 3
    placed = [k for k in range(120) if labels[k] is not None]
    assert {labels[k] for k in placed if k % 4 in (2, 3)} == {labels[10]}
    # a smaller distance separates the sites of a region, and still holds
    split5, c5 = split_by_place(t, (0.34, 0.33, 0.33), min_km=5, seed=0)
    assert c5["units"] > counts["units"]
    assert _cross_split_min_km(t, split5.to_pylist()) >= 5
    with pytest.raises(ParameterError, match="min_km"):
        split_by_place(t, min_km=-1)
    with pytest.raises(ParameterError, match="latitude"):
        split_by_place(t.drop_columns(["latitude"]), min_km=5)


def test_split_command(tmp_path, capsys) -> None:
    src = tmp_path / "in.parquet"
    mf.write_manifest(_places(), src)
    out = tmp_path / "split.parquet"
    argv = ["split", str(src), "--out", str(out), "--by", "place", "--min-km", "100",
            "--fractions", "0.34,0.33,0.33"]  # fmt: skip
    assert main(argv) == 0
    written = mf.read_manifest(out)
    assert _cross_split_min_km(written, written.column("split").to_pylist()) >= 100
    # one place cannot fill three splits 20,000 km apart: exit 2, nothing written
    capsys.readouterr()
    far = tmp_path / "far.parquet"
    argv[argv.index("100")] = "20000"
    argv[argv.index(str(out))] = str(far)
    assert main(argv) == 2
    assert "got no row" in capsys.readouterr().err
    assert not far.exists()
    # CSV holds no bytes: a fingerprint column stays in the Parquet table
    fp = mf.read_manifest(src).append_column("fingerprint", pa.array([b"\x00"] * 120))
    mf.write_manifest(fp, src)
    as_csv = tmp_path / "split.csv"
    assert main(["split", str(src), "--out", str(as_csv)]) == 0
    assert "fingerprint" not in mf.read_manifest(as_csv).column_names
    assert "split" in mf.read_manifest(as_csv).column_names
    assert main(["split", str(src), "--out", str(far), "--min-km", "5"]) == 2
    assert main(["split", str(src), "--out", str(far), "--by", "place"]) == 2


def test_select_keeps_one_clip_per_group(tmp_path, capsys) -> None:
    n = 12
    t = pa.table(
        {
            "key": [f"k{i:02d}" for i in range(n)],
            "duration": [10.0, 30.0, 20.0] + [10.0] * (n - 3),
            "human_sounds": [0.0] * n,
            "l_k": [3.0, 0.5, 2.0] + [2.0] * (n - 3),
            # k00..k02 one recording; k03, k04 another
            "duplicate_group": pa.array([0, 0, 0, 1, 1] + [None] * (n - 5), pa.int64()),
        }
    )
    chosen, report = select_benchmark(t, theta=1.0, balance="none")
    keys = chosen.column("key").to_pylist()
    # k01 is the longest but not localizable: k02, the longest localizable, stands
    assert "k02" in keys and "k00" not in keys and "k01" not in keys
    assert ("k03" in keys) != ("k04" in keys)
    assert report["duplicates_removed"] == 2
    assert len(keys) == n - 1 - 2
    everything, rep_all = select_benchmark(t, theta=1.0, balance="none", keep_duplicates=True)
    assert everything.num_rows == n - 1 and rep_all["duplicates_removed"] is None
    pool = tmp_path / "scored.parquet"
    mf.write_manifest(t, pool)
    capsys.readouterr()
    argv = ["localizability", "select", "--manifest", str(pool), "--theta", "1",
            "--balance", "none", "--out", str(tmp_path / "b.csv")]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().err.splitlines()[0])["duplicates_removed"] == 2
    assert main([*argv, "--keep-duplicates"]) == 0
    assert json.loads(capsys.readouterr().err.splitlines()[0])["duplicates_removed"] is None
