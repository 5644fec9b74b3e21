#!/usr/bin/env bash
# Install everything the tests need (once, cached) and run every check:
# formatting, lints, Rust unit tests, the stub check and the pytest suite.
#
#   bash scripts/test.sh            # everything
#   AGL_FAST_SKIP_TORCH=1 bash scripts/test.sh   # without the torch extra
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${AGL_FAST_CACHE:-$HOME/.cache/agl-fast}
VENV=${AGL_FAST_VENV:-$CACHE/venv}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$CACHE/target}
export PIP_DISABLE_PIP_VERSION_CHECK=1

step() { printf '\n==> %s\n' "$*"; }

step "system packages (apt)"
# Debian packages some tests need; installed once when missing (as root),
# otherwise those tests skip:
#   ffmpeg, lame               reference decoder/encoder of the MP3/AAC/Vorbis parity tests
#   chromium, chromium-driver  the game's end-to-end test in a headless browser (Selenium)
#   postgresql                 initdb/pg_ctl for the game's throwaway PostgreSQL cluster
#   espeak-ng                  real synthetic speech for the speech-tagger tests
#   libmysofa1                 ships the MIT KEMAR HRTF (SOFA) for the binaural simulation
APT_MISSING=()
command -v ffmpeg >/dev/null 2>&1 || APT_MISSING+=(ffmpeg lame)
command -v chromium >/dev/null 2>&1 || APT_MISSING+=(chromium)
command -v chromedriver >/dev/null 2>&1 || APT_MISSING+=(chromium-driver)
{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } \
  || APT_MISSING+=(postgresql)
command -v espeak-ng >/dev/null 2>&1 || APT_MISSING+=(espeak-ng)
[ -f /usr/share/libmysofa/MIT_KEMAR_normal_pinna.sofa ] || APT_MISSING+=(libmysofa1)
if [ ${#APT_MISSING[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -q >/dev/null \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${APT_MISSING[@]}" >/dev/null; } \
      || echo "apt-get could not install ${APT_MISSING[*]}: their tests will skip"
  else
    echo "missing ${APT_MISSING[*]} (not root or no apt-get): their tests will skip"
  fi
fi

step "python environment ($VENV)"
# Everything is installed through requirements/constraints.txt, the lock of
# the binary pairs (torch/torchaudio/torchvision, onnxruntime). The
# environment is stamped with the hash of the lock and of the requirement
# files it was built from: an unchanged stamp means nothing is installed
# again, only checked; a changed one (a bumped lock, a new requirement)
# installs again. Either way scripts/check_env.py then imports every pair
# and stops the run with one line naming the pair that does not load
# (AGL_FAST_REINSTALL=1 forces the install). With an empty cache
# (AGL_FAST_CACHE=$(mktemp -d) bash scripts/test.sh) this is the
# fresh-machine run.
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
REQS=(-c requirements/constraints.txt -r requirements/test.txt)
CHECK_ARGS=()
if [ "${AGL_FAST_SKIP_TORCH:-0}" != "1" ]; then
  # the torch and hf extras (CUDA build from the registry, several GB)
  REQS+=(-r requirements/torch.txt)
else
  CHECK_ARGS+=(--no-torch)
fi
STAMP_FILE="$VENV/.agl-fast-requirements"
STAMP=$(cat requirements/constraints.txt requirements/test.txt requirements/torch.txt \
  <(echo "skip_torch=${AGL_FAST_SKIP_TORCH:-0}") | sha256sum | cut -d' ' -f1)
if [ "${AGL_FAST_REINSTALL:-0}" = "1" ] || [ "$(cat "$STAMP_FILE" 2>/dev/null)" != "$STAMP" ]; then
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q "${REQS[@]}"
  "$PY" scripts/check_env.py "${CHECK_ARGS[@]}"
  echo "$STAMP" > "$STAMP_FILE"
else
  "$PY" scripts/check_env.py "${CHECK_ARGS[@]}"
fi

step "rust: fmt, clippy, unit tests"
# libopus (the Opus decoder) is compiled from source with CMake: the
# system's when there is one, else the venv's (requirements/test.txt).
command -v cmake >/dev/null 2>&1 || export CMAKE="$VENV/bin/cmake"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --profile dev-release -- -D warnings
cargo test -p agl-core --profile dev-release -q

step "build the release wheel (abi3, manylinux) and install it"
DIST="$CACHE/dist"
rm -rf "$DIST"
"$VENV/bin/maturin" build --release --out "$DIST" --quiet
WHEEL=$(ls "$DIST"/agl_fast-*-abi3-manylinux*.whl)
# the licence files travel in the wheel's .dist-info/licenses (the sdist's
# are checked, with a clean-environment install of it, by tests/test_sdist.py)
"$PY" - "$WHEEL" <<'PYEOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ("LICENSE-MIT", "LICENSE-APACHE", "LICENSE-libopus")
missing = [f for f in need if not any(n.endswith(".dist-info/licenses/" + f) for n in names)]
sys.exit(f"the wheel lacks {missing}" if missing else 0)
PYEOF
"$PY" -m pip install -q --no-deps --force-reinstall "$WHEEL"

step "the wheel installs and runs in a clean environment"
CLEAN=$(mktemp -d)
trap 'rm -rf "$CLEAN"' EXIT
python3 -m venv "$CLEAN/venv"
"$CLEAN/venv/bin/pip" install -q "$WHEEL"
(cd "$CLEAN" && "$CLEAN/venv/bin/agl-fast" features --demo >/dev/null && \
  "$CLEAN/venv/bin/agl-fast" curate --demo --quiet --out "$CLEAN/curated" >/dev/null && \
  "$CLEAN/venv/bin/python" -c "import agl_fast, numpy as np; \
assert agl_fast.bat(np.zeros((2, 3200), np.float32)).shape == (4, 11, 128); \
print('clean venv OK:', agl_fast.__version__)")

step "python lint and types"
"$VENV/bin/ruff" check python tests benches
"$VENV/bin/ruff" format --check python tests benches
"$VENV/bin/mypy" python/agl_fast

step "librosa's own suites with their reference data (librosa 0.11 and 1.0)"
# librosa's tests and the librosa-test-data fixtures are laid out in
# ../shared/librosa-suite beside the checkout (or $AGL_FAST_LIBROSA_SUITE).
# tests/test_librosa_suite_installed.py runs the suite of the librosa it
# finds, plain and with agl-fast installed, case by case, and prints the
# per-module table: librosa 0.11's in the pytest step below (the default
# environment), librosa 1.0.0's here, in its own Python 3.12 environment
# ($CACHE/venv-librosa1, built once from requirements/librosa1.txt and
# stamped with its hash), with tests/test_compat_librosa_versions.py.
export AGL_FAST_LIBROSA_SUITE=${AGL_FAST_LIBROSA_SUITE:-$(cd "$ROOT/.." && pwd)/shared/librosa-suite}
LR1_VENV="$CACHE/venv-librosa1"
# the first interpreter that really runs as 3.12 (a pyenv shim on PATH may
# name a version that is not active)
PY312=""
for cand in "$(command -v python3.12 || true)" \
  "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.12*/bin/python; do
  if [ -n "$cand" ] && [ -x "$cand" ] \
    && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
    PY312=$cand
    break
  fi
done
if [ -z "$PY312" ] && [ ! -x "$LR1_VENV/bin/python" ]; then
  echo "SKIPPED: librosa 1.0's suite needs Python 3.12 (no python3.12 on PATH nor in pyenv)"
else
  [ -x "$LR1_VENV/bin/python" ] || "$PY312" -m venv "$LR1_VENV"
  LR1_STAMP=$(sha256sum requirements/librosa1.txt | cut -d' ' -f1)
  if [ "$(cat "$LR1_VENV/.agl-fast-requirements" 2>/dev/null)" != "$LR1_STAMP" ]; then
    "$LR1_VENV/bin/python" -m pip install -q -r requirements/librosa1.txt
    echo "$LR1_STAMP" > "$LR1_VENV/.agl-fast-requirements"
  fi
  "$LR1_VENV/bin/python" -m pip install -q --no-deps --force-reinstall "$WHEEL"
  "$LR1_VENV/bin/python" -m pytest -q -p no:cacheprovider \
    tests/test_compat_librosa_versions.py tests/test_librosa_suite_installed.py
fi

step "pytest"
cd "$ROOT"
"$PY" -m pytest -q tests

step "performance gates (pytest-benchmark suite, ratios against the peers, same run)"
# benches/test_*.py: every gated workload of agl-fast against its best peer
# in the same pytest run, on the same data, outputs checked first, one thread,
# process CPU time, peers and agl-fast taking turns round by round; each test
# fails below its ratio gate or above its memory gate (the one table of
# gates, with what was measured when each was set: benches/_gates.py).
# Quick sizes (--bench-quick) keep the section to a few minutes. Every run
# is stored in the cache ($CACHE/bench/<machine>/NNNN_<commit>_<date>.json:
# times, and in extra_info the ratio, seconds of audio per second per core
# and peak memory) and copied to $AGL_FAST_CI_OUT/benchmark.json (default
# out/) for CI to keep; from the second run on, the table also compares
# each benchmark with the previous stored run. By hand, against a chosen
# run: --benchmark-storage "file://$CACHE/bench" --benchmark-compare=NNNN.
# the start-up gate also runs under librosa 1.0's environment where it exists
if [ -x "$CACHE/venv-librosa1/bin/python" ]; then
  export AGL_FAST_BENCH_PYTHONS="$CACHE/venv-librosa1/bin/python"
fi
BENCH_STORE="$CACHE/bench"
CI_OUT=${AGL_FAST_CI_OUT:-$ROOT/out}
mkdir -p "$BENCH_STORE" "$CI_OUT"
BENCH_ARGS=(--benchmark-only --bench-quick --benchmark-storage "file://$BENCH_STORE"
  --benchmark-autosave --benchmark-json "$CI_OUT/benchmark.json")
if compgen -G "$BENCH_STORE/*/*.json" >/dev/null; then BENCH_ARGS+=(--benchmark-compare); fi
"$PY" -m pytest -q -p no:cacheprovider benches/ "${BENCH_ARGS[@]}"
