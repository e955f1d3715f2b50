#!/usr/bin/env bash
# The README's first command: install, build (which expands the embedded default model, a tiny
# DeepSeek-V4.1 trained by tools/train/, into build/models/default), then show the engine on it:
# `cedar inspect` (layer plan, parameters, KV bytes/token), a few greedy answers through the V4.1
# chat template -- a greeting, a sum, a tool call parsed into OpenAI tool_calls -- and a short story
# continuation as plain text. The model has ~10M parameters: expect simple, often wrong English;
# docs/TRAINING.md gives its measured quality.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
CEDAR=./build/cedar
MODEL=build/models/default
if [ ! -f "$MODEL/config.json" ]; then
  echo "demo: $MODEL is missing (the build expands it from models/default/)" >&2
  exit 1
fi
echo "== cedar inspect --model $MODEL"
"$CEDAR" inspect --model "$MODEL"
for p in "Hello! Who are you?" "What is 12 + 7?" "What is the capital of France?"; do
  echo
  echo "== cedar run --nothink -p '$p' -n 48 --temp 0"
  "$CEDAR" run --nothink -p "$p" -n 48 --temp 0
done
echo
echo "== a tool call through cedar serve's OpenAI API (curl /v1/chat/completions, tools)"
PORT=$((20000 + RANDOM % 20000))
"$CEDAR" serve --port "$PORT" >/dev/null 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done
curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "model": "deepseek-v4-flash",
  "messages": [{"role": "user", "content": "What is the weather in Lisbon?"}],
  "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}],
  "thinking": {"type": "disabled"}, "temperature": 0, "max_tokens": 64}' |
  /usr/bin/python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["choices"][0]["message"], indent=1))'
kill $SERVER 2>/dev/null || true
echo
echo "== cedar run --raw -p 'Once upon a time' -n 48 --temp 0 (plain text continuation)"
"$CEDAR" run --raw -p "Once upon a time" -n 48 --temp 0
echo
echo "Interactive chat: $CEDAR run   (/think N, /nothink, /reset, /exit); server: $CEDAR serve"
