#!/usr/bin/env bash
# The README's test command: install, build, run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure -j 2 --timeout 1800)
# Memory and undefined-behaviour errors: the unit tests and the libFuzzer targets built with
# clang, AddressSanitizer and UndefinedBehaviorSanitizer in their own directory (about five
# minutes of tests). The areas that parse untrusted input, hold state and run the server run
# there; the tests dominated by the forward pass (the generator, the prefix cache's model runs,
# cedar run and cedar perplexity, the benches, the forward and kernels areas) and the tokenizer's
# JS-corpus parity take many times longer under ASan and are left to the build above.
bash scripts/build.sh --sanitize
(cd build-asan && ctest --output-on-failure -j 2 --timeout 1800 \
   -L 'unit-(base|text|vision|state|server|runtime|model)|fuzz' \
   -E '^(Generator|PrefixCacheTest|JsParity|RunCli|PerplexityCli|Bench[A-Za-z]*)\.')
