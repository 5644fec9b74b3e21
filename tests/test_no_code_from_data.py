"""No code runs from data: the package source holds no unsafe deserialiser
call (an AST scan), agl-fast's checkpoints hold only tensors and plain
containers, and a resumed run refuses a planted pickle, whatever
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` says, before anything in it runs."""

from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "agl_fast"

#: Calls that build objects from bytes with no restriction (code can run).
ALWAYS_UNSAFE = frozenset({
    "pickle.load", "pickle.loads", "pickle.Unpickler", "_pickle.load", "_pickle.loads",
    "cPickle.load", "cPickle.loads", "dill.load", "dill.loads", "cloudpickle.load",
    "cloudpickle.loads", "joblib.load", "marshal.load", "marshal.loads", "shelve.open",
    "pandas.read_pickle", "torch.jit.load", "torch.package.PackageImporter",
    "yaml.unsafe_load", "yaml.full_load", "yaml.load_all", "yaml.unsafe_load_all",
    "numpy.lib.format.read_array",
})  # fmt: skip
#: The one reviewed exception: the local engine hands its own stage objects,
#: pickled in this process, to the worker processes it starts (what
#: multiprocessing does with any argument); no file is read.
ALLOWED = {("pipeline/engines/local.py", "pickle.loads")}
SAFE_YAML_LOADERS = frozenset({"SafeLoader", "CSafeLoader", "BaseLoader", "CBaseLoader"})


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted origin, from every import of the module."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    out.setdefault("np", "numpy")
    return out


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_const(node: ast.AST | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def unsafe_calls(source: str) -> list[tuple[int, str, str]]:
    """``(line, call, why)`` for every unsafe deserialiser call of ``source``."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func, aliases)
        if name is None:
            continue
        name = name.replace("numpy.core.", "numpy.")
        why = None
        if name in ALWAYS_UNSAFE:
            why = "unrestricted deserialiser"
        elif name == "torch.load" and not _is_const(_kw(node, "weights_only"), True):
            why = "torch.load without weights_only=True"
        elif name == "numpy.load" and not (
            _kw(node, "allow_pickle") is None or _is_const(_kw(node, "allow_pickle"), False)
        ):
            why = "numpy.load with allow_pickle other than False"
        elif name == "yaml.load":
            loader = _kw(node, "Loader") or (node.args[1] if len(node.args) > 1 else None)
            ln = _dotted(loader, aliases) if loader is not None else None
            if ln is None or ln.rsplit(".", 1)[-1] not in SAFE_YAML_LOADERS:
                why = "yaml.load without a safe Loader"
        if why:
            found.append((node.lineno, name, why))
    return found


def test_package_source_has_no_unsafe_deserialiser_call():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100
    # The scripts and benchmarks that ship beside the package, too.
    files += sorted((ROOT / "scripts").rglob("*.py")) + sorted((ROOT / "benches").rglob("*.py"))
    seen_allowed = set()
    problems = []
    for f in files:
        rel = f.relative_to(PACKAGE) if f.is_relative_to(PACKAGE) else f.relative_to(ROOT)
        rel = rel.as_posix()
        for line, name, why in unsafe_calls(f.read_text(encoding="utf-8")):
            if (rel, name) in ALLOWED:
                seen_allowed.add((rel, name))
            else:
                problems.append(f"{rel}:{line}: {name}: {why}")
    assert not problems, "\n".join(problems)
    assert seen_allowed == ALLOWED  # the exception is still needed, and still the only one


@pytest.mark.parametrize(
    ("source", "flagged"),
    [("import torch\ntorch.load(p)", True),
     ("import torch\ntorch.load(p, weights_only=False)", True),
     ("import torch\ntorch.load(p, weights_only=flag)", True),
     ("import torch\ntorch.load(p, map_location='cpu', weights_only=True)", False),
     ("from torch import load as L\nL(p)", True),
     ("import torch as T\nT.load(p)", True),
     ("import torch\ntorch.jit.load(p)", True),
     ("import pickle\npickle.loads(b)", True),
     ("from pickle import load\nload(f)", True),
     ("import pickle as pk\npk.Unpickler(f).load()", True),
     ("import numpy as np\nnp.load(p)", False),
     ("import numpy as np\nnp.load(p, allow_pickle=False)", False),
     ("import numpy as np\nnp.load(p, allow_pickle=True)", True),
     ("import numpy\nnumpy.load(p, allow_pickle=x)", True),
     ("import yaml\nyaml.load(s)", True),
     ("import yaml\nyaml.load(s, Loader=yaml.Loader)", True),
     ("import yaml\nyaml.load(s, Loader=yaml.SafeLoader)", False),
     ("import yaml\nyaml.load(s, yaml.CSafeLoader)", False),
     ("import yaml\nyaml.unsafe_load(s)", True),
     ("import yaml\nyaml.safe_load(s)", False),
     ("import pandas as pd\npd.read_pickle(p)", True),
     ("import joblib\njoblib.load(p)", True)],
)  # fmt: skip
def test_the_scan_finds_each_unsafe_form(source, flagged):
    assert bool(unsafe_calls(source)) is flagged


# --- the project's checkpoints ---------------------------------------------

torch = pytest.importorskip("torch")

from agl_fast.cli import main  # noqa: E402
from agl_fast.exceptions import CheckpointFormatError, InternalError  # noqa: E402
from agl_fast.torch.checkpoint import read_checkpoint, write_checkpoint  # noqa: E402


class Payload:
    """Writes ``marker`` when unpickled: the attack of a planted checkpoint."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"import pathlib; pathlib.Path({str(self.marker)!r}).write_text('ran')",))


def _plant(path: Path, marker: Path, kind: str) -> None:
    """A checkpoint file that runs code when loaded without restriction."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "bare_pickle":
        path.write_bytes(pickle.dumps({"model": Payload(marker), "step": 1}))
    else:  # a genuine torch.save archive whose data.pkl holds the payload
        torch.save({"model": {}, "step": 1, "rng": Payload(marker)}, path)


def test_the_payload_runs_when_loaded_without_restriction(tmp_path):
    """The planted files are real attacks (so the refusals below mean something)."""
    for kind in ("bare_pickle", "torch_zip"):
        marker = tmp_path / f"{kind}.ran"
        _plant(tmp_path / f"{kind}.pt", marker, kind)
        try:  # the unsafe call, here only
            torch.load(tmp_path / f"{kind}.pt", weights_only=False)
        except RuntimeError:  # a bare pickle: run, then refused for its magic number
            assert kind == "bare_pickle"
        assert marker.read_text() == "ran"


@pytest.mark.parametrize("kind", ["bare_pickle", "torch_zip"])
@pytest.mark.parametrize("force_unsafe", [False, True])
def test_read_checkpoint_refuses_a_planted_pickle(tmp_path, monkeypatch, kind, force_unsafe):
    if force_unsafe:
        monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "ran"
    _plant(tmp_path / "checkpoint.pt", marker, kind)
    for own in (True, False):
        with pytest.raises(CheckpointFormatError, match="unreadable checkpoint"):
            read_checkpoint(tmp_path / "checkpoint.pt", own_format=own)
    assert not marker.exists()


def test_read_checkpoint_refuses_other_formats(tmp_path):
    p = tmp_path / "c.pt"
    for body in (b"", b"\x00" * 64, b"PK\x03\x04 not a zip"):
        p.write_bytes(body)
        with pytest.raises(CheckpointFormatError, match="unreadable checkpoint"):
            read_checkpoint(p)
    torch.save([1, 2], p)
    with pytest.raises(CheckpointFormatError, match="expected a dict"):
        read_checkpoint(p)
    torch.save({"model": {}}, p)
    with pytest.raises(CheckpointFormatError, match="not this kind"):
        read_checkpoint(p, required=("model", "step"))
    with warnings.catch_warnings():  # torch.jit is deprecated; its archives still exist
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(p))
    with pytest.raises(CheckpointFormatError, match="TorchScript"):
        read_checkpoint(p)
    with pytest.raises(CheckpointFormatError, match="no checkpoint file"):
        read_checkpoint(tmp_path / "absent.pt")


def test_written_checkpoints_hold_only_tensors_and_plain_containers(tmp_path):
    p = tmp_path / "c.pt"
    state = {"model": {"w": torch.ones(2)}, "rng": torch.get_rng_state(), "step": 3,
             "betas": (0.9, 0.95), "vocab": ["a", "b"], "none": None}  # fmt: skip
    write_checkpoint(state, p)
    back = read_checkpoint(p, required=state)
    assert back["step"] == 3 and torch.equal(back["rng"], state["rng"])
    assert back["betas"] == (0.9, 0.95) and back["vocab"] == ["a", "b"]
    for bad in (np.zeros(2), np.float32(1.0), Path("x"), print, {("a", 1): 1}):
        with pytest.raises(InternalError, match="checkpoint"):
            write_checkpoint({"step": 4, "x": bad}, p)
    assert read_checkpoint(p)["step"] == 3  # the refused states wrote nothing
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c.pt"]


@pytest.mark.parametrize("kind", ["bare_pickle", "torch_zip"])
@pytest.mark.parametrize("force_unsafe", [False, True])
def test_stored_data_trainer_resume_refuses_a_planted_pickle(
    tmp_path, monkeypatch, capsys, kind, force_unsafe
):
    if force_unsafe:
        monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "ran"
    _plant(tmp_path / "run" / "checkpoint.pt", marker, kind)
    rc = main(["spatial", "train", "--data", str(tmp_path / "data"), "--out",
               str(tmp_path / "run"), "--resume", "--steps", "1"])  # fmt: skip
    assert rc == 2
    assert "unreadable checkpoint" in capsys.readouterr().err
    assert not marker.exists()


@pytest.fixture
def bidepth(tmp_path):
    from test_spatial_bidepth import write_sample

    return write_sample(tmp_path / "tiny")


@pytest.mark.parametrize("kind", ["bare_pickle", "torch_zip"])
def test_streamed_resume_refuses_a_planted_pickle(bidepth, tmp_path, monkeypatch, capsys, kind):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    marker = tmp_path / "ran"
    _plant(tmp_path / "RUN" / "checkpoint.pt", marker, kind)
    rc = main(["spatial", "train", "--data", str(bidepth / "bidepth.json"), "--stream",
               "--out", str(tmp_path / "RUN"), "--resume", "--scenes", "4", "--batch-size",
               "2", "--clip-seconds", "0.5", "--dim", "32", "--depth", "1", "--heads", "2",
               "--target-frame", "64"])  # fmt: skip
    assert rc == 2
    assert "unreadable checkpoint" in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.parametrize("force_unsafe", [False, True])
def test_the_issues_command_line_runs_no_payload(bidepth, tmp_path, force_unsafe):
    """``agl-fast spatial train --data tiny/bidepth.json --stream --out RUN
    --resume`` in its own process, the planted pickle at RUN/checkpoint.pt."""
    marker = tmp_path / "ran"
    _plant(tmp_path / "RUN" / "checkpoint.pt", marker, "bare_pickle")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_FORCE")}
    if force_unsafe:
        env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "agl_fast.cli", "spatial", "train", "--data",
         str(bidepth / "bidepth.json"), "--stream", "--out", str(tmp_path / "RUN"), "--resume"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "unreadable checkpoint" in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists()
