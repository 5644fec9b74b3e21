"""The compatibility layer as a drop-in: every librosa name resolves, the
accelerator mode patches librosa in place and undoes it, scripts and test
suites run unchanged, and the counters say what ran where."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import wave
from pathlib import Path

import numpy as np
import pytest

real = pytest.importorskip("librosa")

import agl_fast.compat.librosa as compat  # noqa: E402
from agl_fast.compat.librosa._coverage import markdown_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SUBMODULES = ("beat", "core", "decompose", "display", "effects", "feature", "filters",
              "onset", "segment", "sequence", "util")  # fmt: skip


@pytest.fixture(autouse=True)
def _clean() -> object:
    compat.uninstall()
    compat.reset_counters()
    yield
    compat.uninstall()


def _public(module: object) -> list[str]:
    return [n for n in getattr(module, "__all__", dir(module)) if not n.startswith("_")]


def test_every_public_librosa_name_resolves() -> None:
    """Accelerated names are agl-fast's; every other one is librosa's own
    object, at the top level and in each submodule."""
    import importlib

    checked = 0
    for name in _public(real):
        ours, theirs = getattr(compat, name), getattr(real, name)
        if name in compat.coverage().accelerated:
            assert ours.__module__.startswith("agl_fast.compat.librosa"), name
        elif name not in SUBMODULES:
            assert ours is theirs, name
        checked += 1
    for sub in SUBMODULES:
        mod = importlib.import_module(f"agl_fast.compat.librosa.{sub}")
        lib = importlib.import_module(f"librosa.{sub}")
        for name in _public(lib):
            obj = getattr(mod, name)
            if f"{sub}.{name}" in compat.coverage().accelerated or (
                sub == "core" and name in compat.coverage().accelerated
            ):
                assert obj.__module__.startswith("agl_fast.compat.librosa"), (sub, name)
            else:
                assert obj is getattr(lib, name), (sub, name)
            checked += 1
    assert checked > 300  # 341 names in librosa 0.11
    with pytest.raises(AttributeError):
        compat.util.no_such_function  # noqa: B018


def test_without_librosa_an_uncovered_name_names_the_pip_line() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["librosa"] = None  # not installed
        import agl_fast.compat.librosa as librosa
        import numpy as np
        assert librosa.stft(np.zeros(4096, np.float32)).shape == (1025, 9)
        try:
            librosa.display.specshow
        except Exception as exc:
            print(type(exc).__name__, exc)
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("NotAcceleratedError") and "pip install librosa" in r.stdout


def test_install_patches_librosa_everywhere_and_uninstall_restores_it() -> None:
    import librosa.display
    import librosa.onset

    before = {
        "stft": real.stft,
        "core.stft": real.core.stft,
        "spectrum.stft": real.core.spectrum.stft,
        "melspectrogram": real.feature.melspectrogram,
        "onset.melspectrogram": librosa.onset.melspectrogram,
    }
    compat.install()
    compat.install()  # idempotent
    assert compat.installed()
    assert real.stft is compat.stft and real.core.spectrum.stft is compat.stft
    assert real.feature.melspectrogram is compat.feature.melspectrogram
    assert librosa.onset.melspectrogram is compat.feature.melspectrogram
    # librosa's own internal calls reach agl-fast: onset_strength computes a
    # mel spectrogram and converts it to dB
    y = np.random.default_rng(0).standard_normal(22050).astype(np.float32)
    env = real.onset.onset_strength(y=y, sr=22050)
    calls = compat.coverage().calls
    assert calls["feature.melspectrogram"] == 1 and calls["power_to_db"] == 1
    compat.uninstall()
    assert not compat.installed()
    after = {
        "stft": real.stft,
        "core.stft": real.core.stft,
        "spectrum.stft": real.core.spectrum.stft,
        "melspectrogram": real.feature.melspectrogram,
        "onset.melspectrogram": librosa.onset.melspectrogram,
    }
    assert after == before
    np.testing.assert_allclose(env, real.onset.onset_strength(y=y, sr=22050), rtol=1e-3, atol=1e-3)


def test_hand_overs_are_counted_with_their_reason(tmp_path: Path) -> None:
    path = tmp_path / "a.wav"
    y = (0.1 * np.sin(np.arange(8000) / 5.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(y.tobytes())
    a, _ = compat.load(path, sr=None)
    b, _ = compat.load(io.BytesIO(path.read_bytes()), sr=None)
    np.testing.assert_allclose(a, b, atol=1e-4)
    compat.resample(a.astype(np.float64), orig_sr=8000, target_sr=4000, res_type="fft")
    cov = compat.coverage()
    assert cov.calls["load"] == 2 and cov.calls["resample"] == 1
    reasons = {name: reason for (name, reason) in cov.fallbacks}
    assert "BytesIO" in reasons["load"]
    assert "'fft'" in reasons["resample"]
    assert cov.accelerated_calls == 1


def test_a_script_runs_unchanged_under_the_runner(tmp_path: Path) -> None:
    script = tmp_path / "analysis.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import librosa
            import librosa.display
            import numpy as np
            y = np.random.default_rng(1).standard_normal(22050).astype(np.float32)
            S = librosa.power_to_db(librosa.feature.melspectrogram(y=y, sr=22050))
            print(librosa.stft.__module__, librosa.feature.mfcc.__module__, S.shape, sys.argv[1:])
            sys.exit(int(sys.argv[1]))
            """
        )
    )
    cmd = [sys.executable, "-m", "agl_fast.compat.librosa", "--report", str(script)]
    r = subprocess.run([*cmd, "0", "x"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["agl_fast.compat.librosa", "agl_fast.compat.librosa.feature",
                                "(128,", "44)", "['0',", "'x']"]  # fmt: skip
    assert "accelerated librosa calls" in r.stderr and "feature.melspectrogram: 1" in r.stderr
    # the script's exit status is the runner's
    assert subprocess.run([*cmd, "3"], capture_output=True, timeout=300).returncode == 3


def test_the_pytest_plugin_accelerates_a_suite(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent(
            """
            import librosa
            import numpy as np

            def test_session_option():
                assert librosa.stft.__module__ == "agl_fast.compat.librosa"

            def test_fixture(librosa_accelerated):
                librosa.stft(np.zeros(4096, np.float32))
                assert librosa_accelerated().calls["stft"] == 1
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "agl_fast.compat.librosa.pytest_plugin", "--agl-librosa", "test_user.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout and "librosa calls accelerated" in r.stdout


def test_docs_list_the_coverage_table() -> None:
    """The coverage list of ``docs/compat-librosa.md`` is the table
    coverage() reads (``python scripts/compat_table.py`` rewrites it)."""
    page = (ROOT / "docs" / "compat-librosa.md").read_text()
    start = page.index("<!-- compat-table -->") + len("<!-- compat-table -->")
    end = page.index("<!-- /compat-table -->")
    assert page[start:end].strip() == markdown_table()


def _scene(path: Path, sr: int = 22050, seconds: float = 8.0) -> None:
    """Silence, then notes with sharp onsets every 0.5 s, then silence."""
    rng = np.random.default_rng(7)
    n = int(sr * seconds)
    y = np.zeros(n)
    t = np.arange(int(0.4 * sr)) / sr
    for k, start in enumerate(np.arange(1.0, seconds - 1.5, 0.5)):
        f = 220.0 * 2 ** (k % 7 / 12)
        note = np.sin(2 * np.pi * f * t) * np.exp(-6 * t)
        at = int(start * sr)
        y[at : at + t.size] += 0.5 * note
    y += 0.001 * rng.standard_normal(n)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes((np.clip(y, -1, 1) * 32767).astype("<i2").tobytes())


#: Outputs compared exactly (frame indices, intervals, beat positions).
EXACT = ("idx", "intervals", "onset_times", "beats", "tempo", "dur", "file_dur")
#: Absolute tolerance as a share of the output's largest magnitude: float32
#: STFT rounding by default.
SHARE: dict[str, float] = {}
#: The script's one call handed to librosa: ``resample`` with the default
#: ``soxr_hq``, soxr's own filter (its output is then librosa's, bit for bit).
HANDED = "  handed to librosa: resample x1 (res_type='soxr_hq' is soxr's own filter"


def test_a_realistic_script_runs_unchanged_and_agrees(tmp_path: Path) -> None:
    """tests/librosa_script.py (34 librosa calls, display included) gives the
    same results under the accelerator as under plain librosa: frame
    indices exactly, values within float32 STFT rounding."""
    audio = tmp_path / "scene.wav"
    _scene(audio)
    script = str(ROOT / "tests" / "librosa_script.py")
    plain, fast = tmp_path / "plain.npz", tmp_path / "fast.npz"
    r = subprocess.run(
        [sys.executable, script, str(audio), str(plain), str(tmp_path / "plain.png")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "agl_fast.compat.librosa", "--report", script, str(audio),
         str(fast), str(tmp_path / "fast.png")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "feature.melspectrogram" in r.stderr and (tmp_path / "fast.png").stat().st_size > 0
    for name in ("istft", "feature.chroma_stft", "feature.spectral_contrast", "feature.delta",
                 "util.normalize", "to_mono", "pcen"):  # fmt: skip
        assert f"  {name}: " in r.stderr, name  # ran agl-fast's function
    handed = [line for line in r.stderr.splitlines() if "handed to librosa" in line]
    assert len(handed) == 1 and handed[0].startswith(HANDED), r.stderr
    a, b = np.load(plain), np.load(fast)
    np.testing.assert_array_equal(b["y16"], a["y16"])  # soxr's output, bit for bit
    assert set(a.files) == set(b.files)
    for key in a.files:
        if key in EXACT:
            np.testing.assert_array_equal(b[key], a[key], err_msg=key)
        else:
            ref = np.asarray(a[key], dtype=np.float64)
            scale = float(np.max(np.abs(ref))) if ref.size else 1.0
            np.testing.assert_allclose(
                b[key],
                ref,
                rtol=1e-3,
                atol=SHARE.get(key, 2e-4) * max(scale, 1e-12),
                err_msg=key,
            )
