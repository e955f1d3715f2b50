#!/usr/bin/env bash
# Installs what training the default model needs beyond scripts/install-deps.sh: Debian's
# PyTorch (run the trainer with /usr/bin/python3) and the corpus packages tools/train/corpus.py
# reads (their licences are listed there and in tools/train/README.md). Idempotent.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS=(python3-torch python3-numpy bible-kjv bible-kjv-text fortunes-min dict-devil jargon-text
      wordnet-base)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "train/setup.sh: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
