"""The AGL1K method end to end: ``agl-fast benchmark build CONFIG`` over a
generated corpus (real speech from espeak-ng, a tone) and the two real
recordings, with loopback HTTP servers standing in for the reference model,
three judges and two benchmarked models (real HTTP, real files, the real
Silero speech tagger).

curate -> tag -> query -> evaluate -> judge -> fit -> score -> select -> query -> evaluate
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("httpx")
sf = pytest.importorskip("soundfile")

from _alm_server import FakeALM, answer_json  # noqa: E402
from agl_fast import manifest as mf  # noqa: E402
from agl_fast.cli import main  # noqa: E402
from agl_fast.localizability import LocalizabilityWeights  # noqa: E402

KEY = "sk-test-chain-0123456789abcdef"
SR = 16000
# key -> (file, latitude, longitude, city, country, continent)
PLACES = {
    "paris": ("paris.wav", 48.8566, 2.3522, "Paris", "France", "Europe"),
    "london": ("london.wav", 51.5072, -0.1276, "London", "United Kingdom", "Europe"),
    "tone": ("tone.wav", 35.6762, 139.6503, "Tokyo", "Japan", "Asia"),
    "aporee_26839_30948": ("20020207EssaouiraRempartsMuezzin.mp3", 31.51633429397,
                           -9.766309261322, "Essaouira", "Morocco", "Africa"),
    "aporee_5201_6631": ("AmselanDietersFensterJuni2003Edit.mp3", 52.4965138837, 13.428567946,
                         "Berlin", "Germany", "Europe"),
}  # fmt: skip
BERLIN, REUPLOAD = "aporee_5201_6631", "berlin_reupload"
SPEECH = {"paris": "The train to Versailles leaves from platform two.",
          "london": "Mind the gap between the train and the platform, please."}  # fmt: skip


@pytest.fixture(autouse=True)
def api_keys(monkeypatch, tmp_path):
    for v in ("OPENAI_API_KEY", "VLLM_API_KEY", "GEMINI_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.setenv(v, KEY)
    monkeypatch.setenv("AGL_FAST_KEYS", str(tmp_path / "no-keys.ini"))


@pytest.fixture
def corpus(tmp_path, shared_dir):
    exe = shutil.which("espeak-ng")
    if exe is None:
        pytest.skip("espeak-ng is not installed (scripts/test.sh installs it)")
    d = tmp_path / "corpus"
    d.mkdir()
    for key, text in SPEECH.items():
        wav = d / PLACES[key][0]
        subprocess.run([exe, "-v", "en", "-s", "140", "-w", str(wav), text], check=True)
    t = np.arange(6 * SR) / SR
    tone = 0.2 * np.sin(2 * np.pi * 440 * t) * (1 + 0.5 * np.sin(2 * np.pi * 0.5 * t))
    sf.write(d / "tone.wav", tone.astype(np.float32), SR)
    for key in ("aporee_26839_30948", "aporee_5201_6631"):
        shutil.copy(shared_dir / "agl1k" / PLACES[key][0], d / PLACES[key][0])
    man = d / "crawl.csv"
    rows = ["key,path,latitude,longitude,city,country,continent"]
    rows += [f"{k},{v[0]},{v[1]},{v[2]},{v[3]},{v[4]},{v[5]}" for k, v in PLACES.items()]
    # the Berlin recording uploaded again under another name
    shutil.copy(d / PLACES[BERLIN][0], d / "reupload.mp3")
    rows.append(f"{REUPLOAD},reupload.mp3,{','.join(str(v) for v in PLACES[BERLIN][1:])}")
    man.write_text("\n".join(rows) + "\n")
    frames = {sf.info(d / v[0]).frames: k for k, v in PLACES.items()}
    return d, man, frames


def _servers(frames):
    def truth(key):
        _, lat, lon, city, country, cont = PLACES[key]
        return answer_json(city, country, cont, lat, lon)

    far = answer_json("Sydney", "Australia", "Oceania", -33.87, 151.21)

    def reference(clip, body):
        # right on the two speech clips, far off elsewhere
        return truth(clip) if clip in SPEECH else far

    def judge(score):
        def answer(clip, body):
            text = body["messages"][0]["content"][0]["text"]
            listed = [ln[2:] for ln in text.split("Reasoning text:")[0].splitlines()
                      if ln.startswith("- ")]  # fmt: skip
            return json.dumps({c: score for c in listed})

        return answer

    def model_a(clip, body):
        return truth(clip)

    servers = {}
    for name, fn in [
        ("reference", reference),
        ("j1", judge(0.9)),
        ("j2", judge(0.8)),
        ("j3", judge(0.7)),
        ("model_a", model_a),
        ("model_b", lambda c, b: far),
    ]:
        s = FakeALM(KEY, clips=frames)
        s.answer_fn = fn
        servers[name] = (s, s.start() + "/v1")
    return servers


FAST = ["--backoff-base", "0.02", "--timeout", "10", "--breaker-threshold", "50"]


def _config(d: Path, servers) -> Path:
    def model(name, model_id, protocol=True):
        args = [*FAST, *(["--protocol", "agl1k"] if protocol else [])]
        return (f'provider = "vllm"\nmodel = "{model_id}"\nbase_url = "{servers[name][1]}"\n'
                f"args = {json.dumps(args)}\n")  # fmt: skip

    judges = "".join(f"[[judges]]\n{model(j, j, False)}" for j in ("j1", "j2", "j3"))
    text = f"""out = "build"
judge_args = {json.dumps(FAST)}
[curate]
manifest = "crawl.csv"
args = ["--tag", "speech", "--max-duration", "30", "--mono"]
[reference]
{model("reference", "ref-model")}
{judges}
[localizability]
min_samples = 1
theta = 0.5
[select]
balance = "none"
[[models]]
{model("model_a", "model-a")}
[[models]]
{model("model_b", "org/model-b")}
[evaluate]
n_boot = 20
"""
    cfg = d / "bench.toml"
    cfg.write_text(text)
    return cfg


def test_benchmark_build_end_to_end(corpus, capsys):
    d, _man, frames = corpus
    servers = _servers(frames)
    try:
        cfg = _config(d, servers)
        assert main(["benchmark", "build", str(cfg)]) == 0, capsys.readouterr().err
        out = d / "build"
        pool = mf.read_manifest(out / "pool.parquet")
        assert "speech_classes" in pool.column_names
        # the reference got the original files, base64 input_audio in their own format,
        # with no sampling parameter
        ref = servers["reference"][0]
        assert ref.requests() == pool.num_rows
        for rec in ref.records:
            part = rec.body["messages"][0]["content"][1]["input_audio"]
            assert not {"temperature", "top_p", "seed", "max_tokens"} & set(rec.body)
            fmt = "mp3" if rec.clip and rec.clip.startswith("aporee") else "wav"
            assert part["format"] == fmt
            assert base64.b64decode(part["data"]) == (d / PLACES[rec.clip][0]).read_bytes()
        # the judges saw each clip's tags (here the speech tagger's one class)
        for j in ("j1", "j2", "j3"):
            assert servers[j][0].requests() >= 2
        w = LocalizabilityWeights.load(out / "localizability" / "weights.json")
        assert w.positive == ("Speech",) and w.negative == ()
        assert (out / "localizability" / "judge_agreement.csv").is_file()
        bench = mf.read_manifest(out / "benchmark.csv")
        assert tuple(bench.column_names[:20]) == mf.AGL1K_COLUMNS
        assert sorted(bench.column("key").to_pylist()) == ["london", "paris"]
        assert all(v > 0.5 for v in bench.column("l_k").to_pylist())
        board = (out / "leaderboard" / "leaderboard.md").read_text()
        assert "model-a" in board and "org__model-b" in board
        import pandas as pd

        tidy = pd.read_csv(out / "leaderboard" / "metrics.csv")
        pick = tidy[(tidy["mode"] == "agl1k") & (tidy["subset"] == "all")]
        dist = pick.set_index(["model", "metric"])["value"]
        assert dist[("model-a", "mean_distance_km")] < 1e-6
        assert dist[("org__model-b", "mean_distance_km")] > 15000
        assert board.index("## agl1k") < board.index("## strict")
        # the re-upload is grouped with its original, which stands for it
        # (same length and quality: the smaller key); the pool and the
        # leaderboard say so
        curated = mf.read_manifest(out / "curated" / "curated.parquet").to_pylist()
        row = {r["key"]: r for r in curated}
        assert row[REUPLOAD]["duplicate_of"] == BERLIN
        assert [r["key"] for r in curated if r["duplicate_group"] is not None] == [
            BERLIN, REUPLOAD,
        ]  # fmt: skip
        assert REUPLOAD not in pool.column("key").to_pylist()
        assert row[REUPLOAD]["passed"] and row[BERLIN]["passed"]
        passed = sum(bool(r["passed"]) for r in curated)
        assert (
            f"Duplicate recordings: 1 of the {passed} clips that passed curation removed" in board
        )
        # resumable: a second build sends nothing already answered
        n = {k: s.requests() for k, (s, _) in servers.items()}
        assert main(["benchmark", "build", str(cfg)]) == 0
        assert {k: s.requests() for k, (s, _) in servers.items()} == n
    finally:
        for s, _ in servers.values():
            s.stop()


def test_bad_config_is_a_typed_error(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("out = 'x'\n[curate]\nmanifest = 'm.csv'\n")
    assert main(["benchmark", "build", str(cfg)]) == 2
    assert "[reference]" in capsys.readouterr().err
    cfg.write_text("not = = toml")
    assert main(["benchmark", "build", str(cfg)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
