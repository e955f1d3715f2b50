#!/usr/bin/env bash
# The README's first command: install, build, generate the embedded default model (tiny preset,
# real DeepSeek tokenizer, random weights) and run the engine on it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
./build/cedar --help
