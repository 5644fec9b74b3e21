"""The model registry (``agl-fast models``), ``query --model`` applying a
model's route and settings, and the in-process transformers route on tiny
random-weight models built from configs (never downloaded)."""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

sf = pytest.importorskip("soundfile")
pytest.importorskip("httpx")

from _alm_server import FakeALM  # noqa: E402
from agl_fast.alm.models import get_model, model_names, models  # noqa: E402
from agl_fast.cli import main  # noqa: E402

KEY = "sk-test-0123456789abcdef0123456789abcdef"
FAST = ["--backoff-base", "0.02", "--no-progress", "--timeout", "5"]
#: The 16 rows of Table 1 of the AGL1K paper, as printed there.
TABLE1 = [
    "Gemini 3 Pro", "Gemini 2.5 Pro", "Gemini 2.5 Flash", "Gemini 2.5 Flash-Lite",
    "Gemini 2.0 Flash-Thinking", "Gemini 2.0 Flash", "Gemini 2.0 Flash-Lite",
    "GPT-4o Audio Preview", "Qwen3-Omni", "Qwen2.5-Omni", "Phi-4-MM1", "Kimi-Audio",
    "Gemma-3n-E4B-it", "MiniCPM-o-2.6", "Mimo-Audio", "Mimo-Audio-Think",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _keys(monkeypatch, tmp_path):
    for v in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "VLLM_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.setenv(v, KEY)
    monkeypatch.setenv("AGL_FAST_KEYS", str(tmp_path / "no-keys.ini"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing may come from the hub


def make_clips(d: Path, n: int, sr: int = 16000) -> tuple[Path, Path, dict[int, str]]:
    """n noise clips of distinct lengths (the loopback server names a clip by
    its frame count), their manifest and frames -> key."""
    audio = d / "audio"
    audio.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(3)
    frames, rows = {}, []
    for i in range(n):
        m = sr // 2 + 400 * i
        sf.write(audio / f"c{i}.wav", 0.1 * rng.standard_normal(m).astype(np.float32), sr)
        frames[m] = f"k{i}"
        rows.append({"key": f"k{i}", "mp3name": f"c{i}.wav"})
    man = d / "manifest.csv"
    with man.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["key", "mp3name"])
        w.writeheader()
        w.writerows(rows)
    return man, audio, frames


# --- the registry and its command ---------------------------------------------


def test_registry_holds_table1_models_once():
    specs = models()
    assert [m.display for m in specs] == TABLE1
    assert len(set(model_names())) == 16
    assert sum(m.open_weights for m in specs) == 8
    assert {m.route for m in specs if not m.open_weights} == {"openrouter"}


def test_table1_labels_match_the_paper(shared_dir):
    text = "\n".join(p.read_text(encoding="utf-8") for p in (shared_dir / "seeds").glob("00*.txt"))
    table = text[text.index("\nRANDOM\t") :].split("\n\n")[0]  # Table 1's rows
    rows = re.findall(r"^([^\t\n]+)\t[\d.<]", re.sub(r"</?u>", "", table), flags=re.M)
    assert rows == ["RANDOM", *TABLE1]


def test_reference_generation_settings():
    assert get_model("qwen2.5-omni").params() == {"max_tokens": 2048, "temperature": 0.0}
    assert get_model("phi-4-mm").params() == {"max_tokens": 512, "temperature": 0.0}
    assert get_model("gemma-3n-e4b-it").params() == {"max_tokens": 256, "temperature": 0.0}
    assert get_model("minicpm-o-2.6").params() == {"max_tokens": 2048, "temperature": 0.3}
    kimi = get_model("kimi-audio").params()
    assert kimi["temperature"] == 0.0 and kimi["audio_temperature"] == 0.8
    assert get_model("mimo-audio").params() == {"thinking": False}
    assert get_model("MiMo-Audio-Think").params() == {"thinking": True}
    gemini = get_model("gemini-3-pro")
    assert gemini.params() == {} and gemini.protocol == "agl1k"


def test_register_refuses_duplicates_and_bad_routes():
    from dataclasses import replace

    from agl_fast.alm.models import register_model
    from agl_fast.exceptions import ParameterError

    spec = get_model("phi-4-mm")
    with pytest.raises(ParameterError, match="registered already"):
        register_model(spec)
    with pytest.raises(ParameterError, match="unknown route"):
        register_model(replace(spec, name="x-new", route="carrier-pigeon"))
    with pytest.raises(ParameterError, match="lower case"):
        register_model(replace(spec, name="Bad Name"))


def test_models_list_and_show(capsys):
    assert main(["models", "list"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 17  # header + 16
    for label, line in zip(TABLE1, lines[1:], strict=True):
        assert f"  {label}  " in line
    assert "512 new tokens, greedy" in next(x for x in lines if x.startswith("phi-4-mm "))
    assert main(["models", "show", "minicpm-o-2.6"]) == 0
    out = capsys.readouterr().out
    assert "route:         vllm" in out and "temperature 0.3" in out and "trust_remote_code" in out
    assert main(["models", "show", "qwen2.5-omni", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model_id"] == "Qwen/Qwen2.5-Omni-7B" and d["route"] == "transformers"
    assert d["system_prompt"].startswith("You are Qwen, a virtual human")
    assert main(["models", "list", "--json"]) == 0
    assert [m["display"] for m in json.loads(capsys.readouterr().out)] == TABLE1
    assert main(["models", "list", "--route", "transformers"]) == 0
    names = [x.split()[0] for x in capsys.readouterr().out.strip().splitlines()[1:]]
    assert names == ["qwen2.5-omni", "phi-4-mm", "kimi-audio", "gemma-3n-e4b-it", "mimo-audio",
                     "mimo-audio-think"]  # fmt: skip
    assert main(["models", "show", "no-such-model"]) == 2
    assert "unknown model 'no-such-model'" in capsys.readouterr().err


# --- query --model: the route and settings reach the request --------------------


@pytest.fixture
def server():
    servers = []

    def start(**kw):
        s = FakeALM(KEY, **kw)
        servers.append(s)
        return s, s.start()

    yield start
    for s in servers:
        s.stop()


def _query(url, man, audio, out, *extra):
    return main(["query", "--manifest", str(man), "--audio-dir", str(audio), "--out", str(out),
                 "--base-url", url + "/v1", *FAST, *extra])  # fmt: skip


def test_query_model_applies_route_and_settings(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 2)
    srv, url = server(clips=frames)
    assert _query(url, man, audio, tmp_path / "a", "--model", "minicpm-o-2.6") == 0
    bodies = [r.body for r in srv.records]
    assert len(bodies) == 2
    for b in bodies:
        assert b["model"] == "openbmb/MiniCPM-o-2_6"
        assert b["max_tokens"] == 2048 and b["temperature"] == 0.3
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["provider"] == "vllm" and run["params"]["temperature"] == 0.3
    assert pq.read_table(tmp_path / "a" / "openbmb__MiniCPM-o-2_6.parquet").num_rows == 2


def test_query_model_flags_override_settings(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 1)
    srv, url = server(clips=frames)
    out = tmp_path / "b"
    code = _query(url, man, audio, out, "--model", "qwen2.5-omni", "--provider", "vllm",
                  "--temperature", "0.7", "--max-tokens", "64", "--param", "top_k=3")  # fmt: skip
    assert code == 0
    (body,) = [r.body for r in srv.records]
    assert body["model"] == "Qwen/Qwen2.5-Omni-7B"
    assert (body["temperature"], body["max_tokens"], body["top_k"]) == (0.7, 64, 3)


def test_registry_name_on_another_provider_is_sent_as_given(server, tmp_path, capfd):
    # gemini-2.5-pro is also Gemini's own id: --provider openai keeps it, with a warning
    man, audio, frames = make_clips(tmp_path, 1)
    srv, url = server(clips=frames)
    assert _query(url, man, audio, tmp_path / "d", "--model", "gemini-2.5-pro",
                  "--provider", "openai") == 0  # fmt: skip
    (body,) = [r.body for r in srv.records]
    assert body["model"] == "gemini-2.5-pro" and "max_tokens" not in body
    assert "sent as given, without the registry's settings" in capfd.readouterr().err


def test_query_model_api_entry_sends_reference_protocol(server, tmp_path):
    man, audio, frames = make_clips(tmp_path, 1)
    srv, url = server(clips=frames)
    assert _query(url, man, audio, tmp_path / "c", "--model", "gpt-4o-audio") == 0
    (body,) = [r.body for r in srv.records]
    assert body["model"] == "openai/gpt-4o-audio-preview"
    assert "temperature" not in body and "max_tokens" not in body
    part = body["messages"][0]["content"][1]["input_audio"]
    assert part["data"] == __import__("base64").b64encode((audio / "c0.wav").read_bytes()).decode()
    run = json.loads((tmp_path / "c" / "run.json").read_text())
    assert run["provider"] == "openrouter" and run["protocol"] == "agl1k"


def test_query_unregistered_model_needs_provider(tmp_path, capsys):
    man, _, _ = make_clips(tmp_path, 1)
    code = main(["query", "--model", "my-model", "--manifest", str(man), "--out", str(tmp_path)])
    assert code == 2
    assert "--provider is needed" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "needed"),
    [("kimi-audio", "kimia_infer"), ("mimo-audio-think", "MiMo-Audio-Tokenizer"),
     ("minicpm-o-2.6", "trust_remote_code")],
)  # fmt: skip
def test_remote_code_models_get_a_typed_error(tmp_path, capsys, name, needed):
    man, _, _ = make_clips(tmp_path, 1)
    code = main(["query", "--model", name, "--provider", "transformers", "--manifest", str(man),
                 "--out", str(tmp_path / "o")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and needed in err and "does not run in-process" in err
    assert not (tmp_path / "o" / "results.sqlite").exists()


# --- the in-process transformers route ------------------------------------------


def test_transformers_route_without_transformers_prints_pip_line(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails as when absent
    man, _, _ = make_clips(tmp_path, 1)
    code = main(["query", "--provider", "transformers", "--model", "m", "--manifest", str(man),
                 "--out", str(tmp_path / "o")])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "agl-fast: 'query' needs the missing package transformers: pip install 'agl-fast[hf]'"
    )


HAVE_HF = all(importlib.util.find_spec(m) for m in ("torch", "transformers", "torchvision"))
needs_hf = pytest.mark.skipif(
    not HAVE_HF, reason="needs torch, torchvision and transformers (pip install 'agl-fast[hf]')"
)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    if not HAVE_HF:
        pytest.skip("needs torch, torchvision and transformers (pip install 'agl-fast[hf]')")
    from _tiny_hf import build_phi4_multimodal, build_qwen25_omni

    root = tmp_path_factory.mktemp("tiny")
    return {
        "qwen": build_qwen25_omni(root / "qwen25omni"),
        "phi4": build_phi4_multimodal(root / "phi4mm"),
    }


def _local(model_dir, man, audio, out, *extra):
    return main(["query", "--provider", "transformers", "--model", str(model_dir),
                 "--manifest", str(man), "--audio-dir", str(audio), "--out", str(out),
                 "--device", "cpu", "--max-tokens", "4", "--no-progress", *extra])  # fmt: skip


def _rows(out: Path) -> dict[str, dict]:
    (path,) = out.glob("*.parquet")
    return {r["question_id"]: r for r in pq.read_table(path).to_pylist()}


@needs_hf
@pytest.mark.parametrize("arch", ["qwen", "phi4"])
def test_transformers_route_generates_batches_and_resumes(tiny_models, tmp_path, capfd, arch):
    # 22.05 kHz clips: the route resamples them to the processor's 16 kHz
    man, audio, _ = make_clips(tmp_path, 3, sr=22050)
    out = tmp_path / "batched"
    assert _local(tiny_models[arch], man, audio, out, "--batch-size", "3", "-vv") == 0
    err = capfd.readouterr().err
    assert "generate: a batch of 3 clips" in err
    rows = _rows(out)
    assert sorted(rows) == ["k0", "k1", "k2"]
    for r in rows.values():
        assert r["answer_class"] != "error", r["error"]
        assert r["provider"] == "transformers" and 1 <= r["completion_tokens"] <= 4
        assert r["finish_reason"] in ("stop", "length") and r["prompt_tokens"] > 0
        assert r["audio_seconds_sent"] == pytest.approx(r["audio_seconds_original"], abs=1e-3)
    run = json.loads((out / "run.json").read_text())
    assert run["audio"]["sample_rate"] == 16000 and run["params"]["max_tokens"] == 4
    assert run["request_identity"]["in_process"]["dtype"] == "torch.float32"
    assert run["clips_cut_by_processor"] == 0
    with sqlite3.connect(out / "results.sqlite") as c:
        before = c.execute("SELECT cache_key, latency_s, raw_text FROM results").fetchall()

    # resume: everything is stored, nothing is generated again
    assert _local(tiny_models[arch], man, audio, out, "--batch-size", "3", "-vv") == 0
    err = capfd.readouterr().err
    assert "3 clips (0 without audio skipped), 0 to send" in err
    assert "generate: a batch" not in err
    with sqlite3.connect(out / "results.sqlite") as c:
        assert c.execute("SELECT cache_key, latency_s, raw_text FROM results").fetchall() == before
    run = json.loads((out / "run.json").read_text())
    assert run["summary"]["n_cached"] == 3 and run["summary"]["n_requests"] == 0

    # greedy decoding: one clip at a time gives the batched answers (left padding is right)
    single = tmp_path / "single"
    assert _local(tiny_models[arch], man, audio, single, "--batch-size", "1") == 0
    one = _rows(single)
    assert {k: r["model_output"] for k, r in one.items()} == {
        k: r["model_output"] for k, r in rows.items()
    }


@needs_hf
def test_transformers_route_records_bad_clip_and_keeps_the_rest(tiny_models, tmp_path):
    man, audio, _ = make_clips(tmp_path, 3)
    (audio / "c1.wav").write_bytes(b"RIFF0000WAVEnot audio at all")
    out = tmp_path / "o"
    assert _local(tiny_models["qwen"], man, audio, out, "--batch-size", "3") == 1
    rows = _rows(out)
    assert rows["k1"]["answer_class"] == "error" and rows["k1"]["error"].startswith("audio:")
    assert rows["k0"]["answer_class"] != "error" and rows["k2"]["answer_class"] != "error"


@needs_hf
def test_transformers_route_refuses_unknown_architecture(tmp_path, capsys):
    d = tmp_path / "custom"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "no_such_arch_x", "auto_map": {}}))
    man, audio, _ = make_clips(tmp_path, 1)
    assert _local(d, man, audio, tmp_path / "o") == 2
    assert "trust_remote_code" in capsys.readouterr().err


@needs_hf
def test_device_and_dtype_resolution():
    import torch

    from agl_fast.alm.hf_backend import resolve_device, resolve_dtype
    from agl_fast.exceptions import ParameterError

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_dtype("auto", "cpu") is torch.float32
    assert resolve_dtype("bfloat16", "cpu") is torch.bfloat16
    with pytest.raises(ParameterError, match="--device"):
        resolve_device("tpu")
    with pytest.raises(ParameterError, match="--dtype"):
        resolve_dtype("int3", "cpu")


@needs_hf
def test_transformers_route_refuses_bad_batch_size(tmp_path, capsys):
    man, audio, _ = make_clips(tmp_path, 1)
    for bad in ("0", "-3", "100000"):
        assert _local(tmp_path / "absent", man, audio, tmp_path / "o", "--batch-size", bad) == 2
        assert f"--batch-size must be between 1 and 256, got {bad}" in capsys.readouterr().err


@needs_hf
def test_registry_settings_reach_the_transformers_route(tiny_models, tmp_path, monkeypatch):
    from agl_fast.alm import models as registry
    from agl_fast.alm.models import Generation, ModelSpec

    spec = ModelSpec(
        "tiny-omni", "Tiny Omni", True, "transformers", str(tiny_models["qwen"]),
        Generation(max_tokens=2, temperature=0.0), system_prompt="You are tiny.",
    )  # fmt: skip
    monkeypatch.setitem(registry._MODELS, spec.name, spec)  # removed after the test
    man, audio, _ = make_clips(tmp_path, 2)
    out = tmp_path / "o"
    code = main(["query", "--model", "tiny-omni", "--manifest", str(man), "--audio-dir",
                 str(audio), "--out", str(out), "--device", "cpu", "--no-progress"])  # fmt: skip
    assert code == 0
    run = json.loads((out / "run.json").read_text())
    assert run["provider"] == "transformers" and run["params"]["max_tokens"] == 2
    assert run["request_identity"]["in_process"]["system_prompt"] == "You are tiny."
    assert all(r["completion_tokens"] <= 2 for r in _rows(out).values())


@needs_hf
def test_transformers_route_sampling_is_seeded(tiny_models, tmp_path):
    man, audio, _ = make_clips(tmp_path, 2)
    answers = []
    for run in ("a", "b"):
        out = tmp_path / run
        assert _local(tiny_models["phi4"], man, audio, out, "--temperature", "1.5", "--seed", "7",
                      "--batch-size", "2") == 0  # fmt: skip
        rows = _rows(out)
        assert all(r["answer_class"] != "error" for r in rows.values())
        answers.append({k: r["model_output"] for k, r in rows.items()})
    assert answers[0] == answers[1]  # the seed fixes the draw
    assert _local(tiny_models["phi4"], man, audio, tmp_path / "greedy", "--batch-size", "2") == 0
    greedy = {k: r["model_output"] for k, r in _rows(tmp_path / "greedy").items()}
    assert answers[0] != greedy  # temperature > 0 samples


@needs_hf
def test_clips_longer_than_the_processor_reads_are_counted(tiny_models, tmp_path, capfd):
    # the tiny Qwen2.5-Omni feature extractor reads 2 s windows (chunk_length=2)
    man, audio, _ = make_clips(tmp_path, 2)
    sf.write(audio / "c1.wav", np.zeros(3 * 16000, np.float32), 16000)
    out = tmp_path / "o"
    assert _local(tiny_models["qwen"], man, audio, out) == 0
    assert "reads the first 2.0 s of a clip (a 3.0 s clip" in capfd.readouterr().err
    assert json.loads((out / "run.json").read_text())["clips_cut_by_processor"] == 1
