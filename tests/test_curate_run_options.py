"""The run options of a curation (``--workers``, ``--retry-failed`` with
``--resume``, batch and part sizes, limits) have one rule each, in
``CurateConfig.validate``: the Python API and ``agl-fast curate`` refuse
the same options with the same typed error, for every engine, before the
output directory is touched; and every executor of the one driver writes
a summary of the same form."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

sf = pytest.importorskip("soundfile")

from agl_fast.cli import main  # noqa: E402
from agl_fast.exceptions import ParameterError  # noqa: E402
from agl_fast.pipeline import CurateConfig, curate, discover  # noqa: E402
from agl_fast.pipeline.config import ENGINES  # noqa: E402
from agl_fast.pipeline.engines.local import InProcess, LocalWorkers  # noqa: E402

SR = 8000


@pytest.fixture
def clips(tmp_path: Path) -> Path:
    """Three seconds of noise in each of three WAV files."""
    d = tmp_path / "in"
    d.mkdir()
    rng = np.random.default_rng(41)
    for i in range(3):
        y = 0.1 * rng.standard_normal(3 * SR)
        sf.write(d / f"n{i}.wav", y.astype(np.float32), SR, subtype="FLOAT")
    return d


#: Options no run can start with, the flags that ask for them, and the
#: words of the one error both give.
REFUSED = [
    ({"retry_failed": True}, ["--retry-failed"], "retry_failed continues a run"),
    ({"workers": -1}, ["--workers", "-1"], "workers must be an integer >= 0"),
    ({"batch_size": 0}, ["--batch-size", "0"], "batch_size must be an integer >= 1"),
    ({"part_rows": 0}, ["--part-rows", "0"], "part_rows must be an integer >= 1"),
    ({"file_timeout": -1.0}, ["--file-timeout", "-1"], "file_timeout must be > 0"),
]


@pytest.mark.parametrize(("options", "flags", "message"), REFUSED)
def test_the_api_and_the_command_refuse_the_same_run_options(
    clips: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    options: dict[str, object],
    flags: list[str],
    message: str,
) -> None:
    out = tmp_path / "api"
    with pytest.raises(ParameterError, match=message):
        curate(discover(str(clips)), out, CurateConfig(**options))  # type: ignore[arg-type]
    assert not out.exists()
    out = tmp_path / "cli"
    assert main(["curate", str(clips), "--out", str(out), "--quiet", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agl-fast curate: ") and message in err
    assert not out.exists()


def test_the_rules_hold_for_a_config_checked_alone() -> None:
    CurateConfig(resume=True, retry_failed=True).validate()
    CurateConfig(workers=0).validate()
    with pytest.raises(ParameterError, match="workers must be an integer >= 1 with engine 'ray'"):
        CurateConfig(workers=0).validate("ray")
    with pytest.raises(ParameterError, match="workers must be an integer"):
        CurateConfig(workers=1.5).validate()  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="memory_limit must be a positive integer"):
        CurateConfig(memory_limit=0).validate()
    with pytest.raises(ParameterError, match="engine must be one of"):
        CurateConfig().validate("spark")
    # the per-file options are part of the same check
    with pytest.raises(ParameterError, match="res_type"):
        CurateConfig(res_type="best").validate()
    assert set(ENGINES) == {"local", "ray"}


def test_ray_refuses_zero_workers_before_it_joins_a_cluster(
    clips: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ray = pytest.importorskip("ray")
    from agl_fast.ray import RayActors

    out = tmp_path / "api"
    with pytest.raises(ParameterError, match="engine 'ray'"):
        curate(discover(str(clips)), out, CurateConfig(workers=0), executor=RayActors())
    assert not out.exists()
    out = tmp_path / "cli"
    argv = ["curate", str(clips), "--out", str(out), "--quiet", "--engine", "ray", "--workers", "0"]
    assert main(argv) == 2
    assert "workers must be an integer >= 1 with engine 'ray'" in capsys.readouterr().err
    assert not out.exists()
    assert not ray.is_initialized()


def test_every_local_executor_writes_one_summary_form(clips: Path, tmp_path: Path) -> None:
    inputs = discover(str(clips))
    cfg = CurateConfig(sr=SR, workers=1, batch_size=2)
    forked = curate(inputs, tmp_path / "w", cfg, executor=LocalWorkers())
    inline = curate(inputs, tmp_path / "p", CurateConfig(sr=SR, workers=0), executor=InProcess())
    assert forked.keys() == inline.keys()
    assert forked["this_run"].keys() == inline["this_run"].keys()
    assert forked["engine"] == inline["engine"] == "local"
    assert forked["counts"] == inline["counts"]
    assert forked["this_run"]["workers_started"] == 1
    assert inline["this_run"]["workers_started"] == 0
    assert forked["this_run"]["files"] == inline["this_run"]["files"] == 3
    on_disk = json.loads((tmp_path / "w" / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(forked))
