#!/usr/bin/env bash
# The README's first command: install, build, generate the embedded default model (tiny preset,
# real DeepSeek-V4.1 tokenizer, random weights) once into build/models/tiny, then show the engine
# working on it: `cedar inspect` (layer plan, parameters, KV bytes/token) and a short greedy
# `cedar run` through the V4.1 chat template (random weights give random text; that is expected).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
CEDAR=./build/cedar
MODEL=build/models/tiny
if [ ! -f "$MODEL/config.json" ]; then
  echo "== cedar make-model --preset tiny --seed 1 --out $MODEL"
  rm -rf "$MODEL"
  "$CEDAR" make-model --preset tiny --seed 1 --out "$MODEL"
fi
echo
echo "== cedar inspect --model $MODEL"
"$CEDAR" inspect --model "$MODEL"
echo
echo "== cedar run -m $MODEL -p 'Hello! Who are you?' -n 32 --temp 0"
"$CEDAR" run -m "$MODEL" -p "Hello! Who are you?" -n 32 --temp 0
echo
echo "Interactive chat: $CEDAR run -m $MODEL   (/think N, /nothink, /reset, /exit)"
