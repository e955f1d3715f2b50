#!/usr/bin/python3
"""Trained state -> a checkpoint directory in the release layout, loadable by cedar.

    /usr/bin/python3 tools/train/export.py --template TINY_DIR --data DATA_DIR \
        --state RUN_DIR/state.pt --out MODEL_DIR

The template (a `cedar make-model` directory of the same preset) gives config.json, the
tokenizer files and the tensor inventory: every tensor is written with the template's name, dtype
and shape, in its order, so the layout is the release's by construction. Quantized tensors use
the quantizers QAT trained with (tools/train/quant.py): FP8 E4M3 with a UE8M0 scale per 32x32
block, FP4 E2M1 experts with a UE8M0 scale per (row, 32), Engram rows E4M3 with a per-32 scale.
embed/head: the rows of the used ids are the trained rows; every other row is the trained
"other" row (the head's u), which makes the engine's full softmax the trained one.
The drafter (train_dspark.py's state) is exported the same way; its Markov tables, kept over the
reduced vocabulary like embed/head, expand the same way. A trained state without DSpark stages
exports a model without them: the template's mtp.* tensors are left out and config.json says
num_nextn_predict_layers 0, never random drafter weights under a trained model.
"""

import argparse
import gzip
import json
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import numerics as nx  # noqa: E402
import quant as Q  # noqa: E402

COPY = ("tokenizer.json", "tokenizer_config.json")
MARKOV = {".markov_head.embed.weight": "compact.markov_embed_rows",
          ".markov_head.head.weight": "compact.markov_head_rows"}
DSPARK_KEYS = ("dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids",
               "dspark_markov_rank", "dspark_n_routed_experts", "dspark_num_experts_per_tok")


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(n))
    return meta.pop("__metadata__", None), meta


def is_vision(name):
    """The tensors that exist only with a vision_config: the tower, the aligner, the image
    delimiters and the routers' bias for image rows."""
    return (name.startswith(("vision.", "aligner.", "image_"))
            or name.endswith(".ffn.gate.bias_vl"))


def read_template(template, state):
    """(safetensors metadata, tensor header in order, config) of the make-model template, less
    the DSpark stages and the vision tower when the trained state has none."""
    meta, header = read_header(os.path.join(template, "model.safetensors"))
    with open(os.path.join(template, "config.json")) as f:
        config = json.load(f)
    if not any(k.startswith("mtp.") for k in state):
        header = {k: v for k, v in header.items() if not k.startswith("mtp.")}
        text = config["text_config"]
        text["num_nextn_predict_layers"] = 0
        text["compress_ratios"] = text["compress_ratios"][: text["num_hidden_layers"]]
        for k in DSPARK_KEYS:
            text.pop(k, None)
    if not any(is_vision(k) for k in state):
        header = {k: v for k, v in header.items() if not is_vision(k)}
        config.pop("vision_config", None)
    return meta, header, config


def write_config(config, out):
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def bf16_bits(t):
    return t.float().contiguous().to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def scale_codes(s):
    """Power-of-two scales -> UE8M0 codes."""
    e = torch.log2(s.double()).round().long() + 127
    if (e < 0).any() or (e > 254).any():
        raise ValueError("scale out of the UE8M0 range")
    return e.numpy().astype(np.uint8)


def pack_fp4(values):
    codes = nx.e2m1_encode(values.numpy().astype(np.float32))
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def markov_table(name):
    """The compact name of a vocabulary-sized Markov table (mtp.{last}.markov_head.*), or None."""
    return next((c for suffix, c in MARKOV.items() if name.endswith(suffix)), None)


def expand_rows(used_rows, other_row, used_ids, vocab):
    full = other_row.unsqueeze(0).expand(vocab, -1).clone()
    full[torch.as_tensor(used_ids)] = used_rows
    return full


class Source:
    """Looks up the trained tensor behind each checkpoint name."""

    def __init__(self, state, vocab):
        self.sd = state
        self.vocab = vocab
        self.used = state["used_ids"].numpy()
        self.cache = {}

    def tensor(self, name):
        sd = self.sd
        if name == "embed.weight":
            w = sd["embed.weight"]
            return expand_rows(w[:-1], w[-1], self.used, self.vocab)
        if name == "head.weight":
            return expand_rows(sd["head.weight"], sd["head_other"], self.used, self.vocab)
        if name.endswith(".ffn.gate.weight"):
            return sd[name + ".weight"]
        if markov_table(name):
            w = sd[name]
            return expand_rows(w[:-1], w[-1], self.used, self.vocab)
        return sd[name]

    def quantized(self, base, kind):
        """(raw weight array, raw scale codes) of an FP8 / FP4 / Engram-row tensor."""
        if base not in self.cache:
            w = self.tensor(base + ".weight").float()
            if kind == "fp4":
                v, s = Q.fp4_weight_parts(w)
                self.cache[base] = (pack_fp4(v), scale_codes(s))
            else:
                rows = ".engram.embed" in base
                v, s = Q.fp8_rows_parts(w) if rows else Q.fp8_weight_parts(w)
                self.cache[base] = (nx.e4m3_encode(v.numpy().astype(np.float32)), scale_codes(s))
        return self.cache[base]


def encode(src, name, info, header):
    dt, shape = info["dtype"], tuple(info["shape"])
    base = name.rsplit(".", 1)[0]
    if dt == "F8_E8M0":  # the scale of the weight next to it
        kind = "fp4" if header[base + ".weight"]["dtype"] == "I8" else "fp8"
        a = src.quantized(base, kind)[1]
    elif dt == "F8_E4M3":
        a = src.quantized(base, "fp8")[0]
    elif dt == "I8":
        a = src.quantized(base, "fp4")[0]
    elif dt == "BF16":
        a = bf16_bits(src.tensor(name))
    elif dt == "F32":
        a = src.tensor(name).float().contiguous().numpy()
    else:
        raise ValueError(f"{name}: dtype {dt} not handled")
    if tuple(a.shape) != shape:
        raise ValueError(f"{name}: trained shape {list(a.shape)}, layout says {list(shape)}")
    return np.ascontiguousarray(a).tobytes()


def export(template, state, out):
    meta, header, config = read_template(template, state)
    src = Source(state, config["text_config"]["vocab_size"])
    tensors = {name: (info["dtype"], info["shape"], encode(src, name, info, header))
               for name, info in header.items()}
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"), tensors, meta)
    write_config(config, out)
    for c in COPY:
        if os.path.exists(os.path.join(template, c)):
            shutil.copyfile(os.path.join(template, c), os.path.join(out, c))


def export_compact(template, state, out):
    """models/default/ form (src/model/compact_model.h): config.json and compact.safetensors.gz
    with every tensor but embed/head (and a drafter's Markov tables), plus compact.used_ids and
    the used (+ other) rows of those tables."""
    meta, header, config = read_template(template, state)
    src = Source(state, config["text_config"]["vocab_size"])
    used = state["used_ids"].numpy().astype(np.int32)
    head_rows = torch.cat([state["head.weight"], state["head_other"][None]])
    tensors = {
        "compact.used_ids": ("I32", [len(used)], used.tobytes()),
        "compact.embed_rows": ("BF16", list(state["embed.weight"].shape), bf16_bits(state["embed.weight"]).tobytes()),
        "compact.head_rows": ("BF16", list(head_rows.shape), bf16_bits(head_rows).tobytes()),
    }
    for name, info in header.items():
        if markov_table(name):
            rows = state[name]
            tensors[markov_table(name)] = ("BF16", list(rows.shape), bf16_bits(rows).tobytes())
        elif name not in ("embed.weight", "head.weight"):
            tensors[name] = (info["dtype"], info["shape"], encode(src, name, info, header))
    write_safetensors(os.path.join(out, "compact.safetensors.gz"), tensors, meta, gz=True)
    stale = os.path.join(out, "compact.safetensors")  # expand-model refuses a directory with both
    if os.path.exists(stale):
        os.unlink(stale)
    write_config(config, out)


def write_safetensors(path, tensors, meta=None, gz=False):
    """tensors: name -> (dtype, shape, bytes), written in the given order; gz: as one gzip member
    (no name, mtime 0: the same state gives the same bytes)."""
    new, off = {}, 0
    for name, (dt, shape, b) in tensors.items():
        new[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
    if meta is not None:
        new = {"__metadata__": meta, **new}
    head = json.dumps(new, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as raw:
        f = gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw, mtime=0) if gz else raw
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for _, _, b in tensors.values():
            f.write(b)
        if gz:
            f.close()
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", required=True)
    ap.add_argument("--state", required=True, help="train.py's state.pt")
    ap.add_argument("--out", required=True)
    ap.add_argument("--compact", action="store_true",
                    help="write the compact form (models/default/) instead of the full layout")
    a = ap.parse_args()
    st = torch.load(a.state)
    sd = dict(st["model"])
    os.makedirs(a.out, exist_ok=True)
    (export_compact if a.compact else export)(a.template, sd, a.out)
    print(f"export: {a.out} (step {st.get('step')})")


if __name__ == "__main__":
    main()
