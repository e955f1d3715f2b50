#!/usr/bin/python3
"""numpy reference logits of a cedar checkpoint directory.

    /usr/bin/python3 tools/reference/logits.py --model DIR --ids 0,5,7,... --out FILE.npy
    /usr/bin/python3 tools/reference/logits.py --model DIR --ids-file F --out FILE.npy
    ... --image F [--image G ...]   # each image takes the next 129264 placeholder of the ids

Writes the fp32 logits of every position as a [T, vocab] float32 .npy. The arithmetic is the
pinned reference mode of docs/NUMERICS.md; this program never calls into the C++ engine.
Errors (missing directory or file, bad ids, an id outside the vocabulary, a bad checkpoint)
print a message and exit with status 1.
"""

import argparse
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import numerics as nx  # noqa: E402
from checkpoint import Checkpoint, CheckpointError, load_config  # noqa: E402
from model import ModelArgs, Transformer  # noqa: E402


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage errors exit 1 too, like every other error here
        self.print_usage(sys.stderr)
        print(f"logits.py: error: {message}", file=sys.stderr)
        sys.exit(1)


def parse_ids(text, what):
    parts = [p for p in re.split(r"[\s,]+", text.strip()) if p]
    if not parts:
        raise UsageError(f"{what}: no token ids")
    ids = []
    for p in parts:
        if not re.fullmatch(r"\d+", p):
            raise UsageError(f"{what}: bad token id {p!r}")
        ids.append(int(p))
    return ids


def load_model(model_dir):
    if not os.path.isdir(model_dir):
        raise UsageError(f"--model {model_dir}: no such directory")
    text_cfg, _ = load_config(model_dir)
    args = ModelArgs.from_config(text_cfg)
    ck = Checkpoint(model_dir)
    tok = os.path.join(model_dir, "tokenizer.json")
    return Transformer(args, ck, tok if os.path.exists(tok) else None)


def expand_images(model_dir, ids, paths):
    """Each image takes the next image placeholder of ids, which expands to its span (every
    position the placeholder id). -> (ids, [(first_pos, n_h, n_w, aligner rows)])."""
    import vision  # PIL is needed only for images

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    text = cfg.get("text_config", cfg)
    tower = vision.VisionTower(Checkpoint(model_dir), vision.VisionArgs(cfg, text["hidden_size"]))
    placeholder = int(cfg.get("image_token_id", 129264))
    out, images, at = [], [], 0
    for path in paths:
        try:
            k = ids.index(placeholder, at)
        except ValueError:
            raise UsageError(f"--image {path}: no image placeholder {placeholder} left in the ids")
        plan, _, bits = vision.ip.process(path, tower.a.geometry)
        rows = tower(nx.bf16_from_bits(bits), plan["n_vit_h"], plan["n_vit_w"])
        out += ids[at:k]
        images.append((len(out), plan["n_llm_h"], plan["n_llm_w"], rows))
        out += [placeholder] * plan["tokens"]
        at = k + 1
    return out + ids[at:], images


def main(argv=None):
    ap = _Parser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", required=True, help="checkpoint directory")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--ids", help="comma separated token ids")
    g.add_argument("--ids-file", help="file of whitespace/comma separated token ids")
    ap.add_argument("--out", required=True, help="output .npy, float32 [T, vocab]")
    ap.add_argument("--verbose", action="store_true", help="per-layer progress on stderr")
    ap.add_argument("--image", action="append", default=[],
                    help="an image for the next <｜deepseek_image｜> placeholder in the ids\n"
                         "(repeatable; the placeholder expands to the image's span)")
    a = ap.parse_args(argv)
    try:
        if a.ids is not None:
            ids = parse_ids(a.ids, "--ids")
        else:
            try:
                with open(a.ids_file) as f:
                    ids = parse_ids(f.read(), f"--ids-file {a.ids_file}")
            except OSError as e:
                raise UsageError(f"--ids-file {a.ids_file}: {e.strerror}") from e
        t0 = time.time()
        model = load_model(a.model)
        V = model.args.vocab_size
        bad = [i for i in ids if i >= V]
        if bad:
            raise UsageError(f"token id {bad[0]} is outside the vocabulary (vocab_size {V})")
        progress = None
        if a.verbose:

            def progress(layer):
                print(f"layer {layer} done at {time.time() - t0:.1f}s", file=sys.stderr)

        images = None
        if a.image:
            ids, images = expand_images(a.model, ids, a.image)
        logits = model.forward(np.array(ids, dtype=np.int64), progress, images=images)
        np.save(a.out, logits.astype(np.float32))
        if a.verbose:
            print(f"T={len(ids)} total {time.time() - t0:.1f}s", file=sys.stderr)
    except (UsageError, CheckpointError) as e:
        print(f"logits.py: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"logits.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
