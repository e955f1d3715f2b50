"""The way back in: a compact model (models/default/, export.py --compact) loaded into a
torch_model.Transformer, so training continues from the committed weights in a fresh checkout
(`train.py --init models/default`). Quantized tensors are dequantized exactly (E4M3/E2M1 values
times their UE8M0 scales). The data's used ids may differ from the model's: an id both know keeps
its rows, a new one starts from the "other" row.
"""

import atexit
import gzip
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import numerics as nx  # noqa: E402
from checkpoint import SafetensorsFile  # noqa: E402
from export import markov_table  # noqa: E402


def open_compact(compact_dir):
    """The compact model's safetensors: compact.safetensors, or compact.safetensors.gz (how the
    repository keeps it) inflated into a temporary file that lives until the process exits."""
    plain = os.path.join(compact_dir, "compact.safetensors")
    gz = plain + ".gz"
    if os.path.exists(plain) and os.path.exists(gz):
        sys.exit(f"{compact_dir}: holds both compact.safetensors and compact.safetensors.gz")
    if not os.path.exists(gz):
        return SafetensorsFile(plain)
    tmp = tempfile.mkdtemp(prefix="cedar-compact-")
    atexit.register(shutil.rmtree, tmp, True)
    path = os.path.join(tmp, "compact.safetensors")
    with gzip.open(gz, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 22)
    return SafetensorsFile(path)


def dequant(f, base):
    """FP8 [N, K] with 32x32 block scales, FP4 [N, K/2] with (row, 32) scales, or Engram rows."""
    w, s = f.raw(base + ".weight"), nx.ue8m0_decode(f.raw(base + ".scale"))
    if f.dtype(base + ".weight") == "I8":
        v = nx.unpack_fp4(w)
        return (v.reshape(v.shape[0], -1, 32) * s[:, :, None]).reshape(v.shape)
    v = nx.e4m3_decode(w)
    n, k = v.shape
    if s.shape == (n, k // 32):  # Engram table: a scale per 32 of a row
        return (v.reshape(n, -1, 32) * s[:, :, None]).reshape(n, k)
    full = np.repeat(np.repeat(s, 32, axis=0)[:n], 32, axis=1)[:, :k]
    return v * full


def value(f, name):
    """The values behind a checkpoint tensor name: dequantized for FP8/FP4 weights and Engram
    tables, bf16/f32 as stored; None for a scale (it is part of its weight's value)."""
    if name.endswith(".scale"):
        return None
    if name.endswith(".weight") and f.dtype(name) in ("F8_E4M3", "I8"):
        return dequant(f, name[: -len(".weight")])
    raw = f.raw(name)
    return nx.bf16_from_bits(raw) if f.dtype(name) == "BF16" else np.array(raw, dtype=np.float32)


def torch_state(sd, known, f):
    """sd's tensors with the values `known` gives or the compact file `f` holds under the
    checkpoint's name of each key (the router's weight is a Linear inside Gate: its torch key is
    ffn.gate.weight.weight)."""
    out = dict(known)
    for key in sd:
        if key in out or key == "used_ids":
            continue
        gate = key.endswith(".ffn.gate.weight.weight")
        out[key] = value(f, key[: -len(".weight")] if gate else key)
    return {k: torch.from_numpy(np.ascontiguousarray(out[k], dtype=np.float32)).view(sd[k].shape)
            if k in out else sd[k] for k in sd}


def row_pick(f, used_ids):
    """Where each of `used_ids` sits among the compact model's used ids (their count, the "other"
    row's index, for an id the model did not use), and how many it knew."""
    old_ids = f.raw("compact.used_ids").astype(np.int64)
    pos = {int(v): i for i, v in enumerate(old_ids)}
    pick = np.array([pos.get(int(v), len(old_ids)) for v in used_ids])
    return pick, int((pick < len(old_ids)).sum())


def load_into(model, compact_dir):
    f = open_compact(compact_dir)
    emb, head = (nx.bf16_from_bits(f.raw(n)) for n in ("compact.embed_rows", "compact.head_rows"))
    new_ids = model.used_ids.numpy()
    pick, kept = row_pick(f, new_ids)
    known = {
        "embed.weight": np.concatenate([emb[pick], emb[-1:]]),
        "head.weight": head[pick],
        "head_other": head[-1],
    }
    model.load_state_dict(torch_state(model.state_dict(), known, f))
    print(f"init: {compact_dir}: {kept}/{len(new_ids)} used ids kept their rows", flush=True)


def load_drafter(drafter, compact_dir, used_ids):
    """A DSpark drafter (torch_dspark.DSpark) from a compact model's mtp.* tensors, its Markov
    tables re-indexed to the target's `used_ids` as load_into does embed/head: the drafter of an
    earlier target goes on training against a retrained one."""
    f = open_compact(compact_dir)
    sd = drafter.state_dict()
    pick, kept = row_pick(f, used_ids)
    known = {}
    for key in sd:
        table = markov_table(key)
        if table:
            rows = nx.bf16_from_bits(f.raw(table))
            known[key] = np.concatenate([rows[pick], rows[-1:]])
    drafter.load_state_dict(torch_state(sd, known, f))
    print(f"init drafter: {compact_dir}: {kept}/{len(used_ids)} used ids kept their Markov rows",
          flush=True)
