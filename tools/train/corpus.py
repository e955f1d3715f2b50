#!/usr/bin/python3
"""The prose and technical corpus for training the default cedar model (issue 11).

Reads texts that Debian packages install (tools/train/setup.sh installs them), cuts each source
into whole documents, and writes one JSON object per document: {"source", "doc", "split",
"text"}. Every 20th document of each source is held out (split "heldout"), so held-out
perplexity is measured on documents the model never saw.

Sources (package: licence):
  bible      bible-kjv-text: public domain (King James Version); one document per chapter
  fortunes   fortunes-min: BSD (the BSD fortune files); one document per fortune
  devil      dict-devil: public domain (Ambrose Bierce, The Devil's Dictionary, 1911); one
             document per entry
  jargon     jargon-text: public domain (The Jargon File 4.4.7, per its Debian copyright); one
             document per entry
  wordnet    wordnet-base: the WordNet 3.0 licence (BSD-style, Princeton); one document per
             100 glosses
  python     python3.11 standard library (/usr/lib/python3.11/*.py): PSF licence; one document
             per module

A missing source is reported and skipped (or an error with --require-all).

  /usr/bin/python3 tools/train/corpus.py --out corpus.jsonl [--sources bible,python] [--stats]
"""

import argparse
import glob
import gzip
import json
import os
import re
import subprocess
import sys

HOLDOUT_EVERY = 20


def bible():
    try:
        out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True,
                             check=True).stdout.decode("utf-8")
    except (OSError, subprocess.CalledProcessError):
        return None
    chapters, cur, key = [], [], None
    for line in out.splitlines():
        m = re.match(r"^(\w+?)(\d+):\d+ (.*)$", line)
        if not m:
            continue
        k = (m.group(1), m.group(2))
        if k != key and cur:
            chapters.append(" ".join(cur))
            cur = []
        key = k
        cur.append(m.group(3))
    if cur:
        chapters.append(" ".join(cur))
    return chapters


def fortunes():
    names = ["fortunes", "literature", "riddles"]
    paths = [os.path.join("/usr/share/games/fortunes", n) for n in names]
    paths = [p for p in paths if os.path.isfile(p)]
    if not paths:
        return None
    docs = []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            docs += [d.strip() for d in f.read().split("\n%\n") if d.strip()]
    return docs


def read_gz(path):
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        return f.read()


def devil():
    path = "/usr/share/dictd/devil.dict.dz"
    if not os.path.isfile(path):
        return None
    text = read_gz(path)
    # entries start with a headword line in capitals followed by its definition
    entries = re.split(r"\n(?=[A-Z][A-Z' -]+, [a-z]+\.|[A-Z][A-Z' -]+, n\.)", text)
    return [e.strip() for e in entries if len(e.strip()) > 40 and not e.startswith("00-")]


def jargon():
    path = "/usr/share/doc/jargon-text/jargon.txt.gz"
    if not os.path.isfile(path):
        return None
    text = read_gz(path)
    # entries start with an indented ":headword:" line; the front matter and the index before
    # the first one are left out
    entries = re.split(r"\n(?=   :[^:\n]+:)", text)[1:]
    return [re.sub(r"(?m)^   ", "", e).strip() for e in entries if len(e.strip()) > 40]


def wordnet():
    paths = sorted(glob.glob("/usr/share/wordnet/data.*"))
    if not paths:
        return None
    glosses = []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue  # the licence header, or no gloss
                words = line.split(" ")
                gloss = line.split("|", 1)[1].strip()
                glosses.append(f"{words[4].replace('_', ' ')}: {gloss}")
    return ["\n".join(glosses[i:i + 100]) for i in range(0, len(glosses), 100)]


def python_stdlib():
    paths = sorted(glob.glob("/usr/lib/python3.11/*.py"))
    if not paths:
        return None
    docs = []
    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            docs.append(f.read())
    return docs


SOURCES = {"bible": bible, "fortunes": fortunes, "devil": devil, "jargon": jargon,
           "wordnet": wordnet, "python": python_stdlib}


def documents(names, require_all):
    for name in names:
        docs = SOURCES[name]()
        if docs is None:
            msg = f"corpus.py: source {name} is not installed (tools/train/setup.sh)"
            if require_all:
                sys.exit(msg)
            sys.stderr.write(msg + "; skipped\n")
            continue
        for i, text in enumerate(docs):
            split = "heldout" if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1 else "train"
            yield {"source": name, "doc": i, "split": split, "text": text}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="JSONL output (default stdout)")
    ap.add_argument("--sources", default=",".join(SOURCES),
                    help="comma-separated subset of " + ",".join(SOURCES))
    ap.add_argument("--require-all", action="store_true", help="a missing source is an error")
    ap.add_argument("--stats", action="store_true", help="print documents and bytes per source")
    a = ap.parse_args()
    names = [n for n in a.sources.split(",") if n]
    for n in names:
        if n not in SOURCES:
            sys.exit(f"corpus.py: unknown source {n!r} (known: {', '.join(SOURCES)})")
    out = open(a.out, "w", encoding="utf-8") if a.out else sys.stdout
    stats = {}
    for d in documents(names, a.require_all):
        s = stats.setdefault(d["source"], {"train": [0, 0], "heldout": [0, 0]})
        s[d["split"]][0] += 1
        s[d["split"]][1] += len(d["text"].encode("utf-8"))
        out.write(json.dumps(d, ensure_ascii=False) + "\n")
    if a.stats:
        for name, s in stats.items():
            sys.stderr.write(f"{name:10s} train {s['train'][0]:6d} docs {s['train'][1]:10d} B   "
                             f"heldout {s['heldout'][0]:5d} docs {s['heldout'][1]:9d} B\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
