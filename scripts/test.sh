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

step "python environment ($VENV)"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q -r requirements/test.txt
if [ "${AGL_FAST_SKIP_TORCH:-0}" != "1" ]; then
  # The torch extra (CUDA build from the registry, several GB): installed
  # once into the cached environment, then only checked.
  "$PY" -c "import torch, torchaudio" 2>/dev/null || "$PY" -m pip install -q -r requirements/torch.txt
fi

# ffmpeg is the reference decoder of the MP3/AAC/Vorbis parity tests (they
# skip without it).
if ! command -v ffmpeg >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
   && [ "$(id -u)" = 0 ]; then
  step "ffmpeg and lame (decoder parity references)"
  apt-get install -y -q ffmpeg lame >/dev/null || echo "ffmpeg not installed: its tests will skip"
fi

step "rust: fmt, clippy, unit tests"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --profile dev-release -- -D warnings
cargo test -p agl-core --profile dev-release -q

step "build and install agl-fast (release profile)"
"$PY" -m pip install -q --no-deps --force-reinstall "$ROOT"

step "python lint and types"
"$VENV/bin/ruff" check python tests benches
"$VENV/bin/ruff" format --check python tests benches
"$VENV/bin/mypy" python/agl_fast

step "pytest"
cd "$ROOT"
"$PY" -m pytest -q tests
