"""A small safetensors reader (numpy memmap + json) and the config of a checkpoint directory.

Reads `model.safetensors` or `model.safetensors.index.json` + shards, and `config.json` in the HF
nested layout (`text_config`, `quantization_config`). Raw storage is returned as is: F8_E4M3,
F8_E8M0 and I8 as uint8 arrays, BF16 as uint16, F32 as float32. Every failure raises
CheckpointError with a message naming the file, key or tensor.
"""

import json
import os
import struct

import numpy as np

from numerics import bf16_from_bits


class CheckpointError(RuntimeError):
    pass


_DTYPES = {
    "F8_E4M3": (np.uint8, 1),
    "F8_E8M0": (np.uint8, 1),
    "I8": (np.uint8, 1),
    "U8": (np.uint8, 1),
    "BF16": (np.uint16, 2),
    "F16": (np.float16, 2),
    "F32": (np.float32, 4),
    "I32": (np.int32, 4),
    "I64": (np.int64, 8),
}


class SafetensorsFile:
    def __init__(self, path):
        self.path = path
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) != 8:
                    raise CheckpointError(f"{path}: truncated safetensors header")
                (n,) = struct.unpack("<Q", head)
                if n > size - 8:
                    raise CheckpointError(f"{path}: header length {n} exceeds the file size")
                meta = json.loads(f.read(n).decode("utf-8"))
        except OSError as e:
            raise CheckpointError(f"{path}: cannot read: {e}") from e
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(f"{path}: bad safetensors header JSON: {e}") from e
        meta.pop("__metadata__", None)
        self.data_start = 8 + n
        self.data_size = size - self.data_start
        self.meta = meta
        self._mm = None

    def names(self):
        return list(self.meta.keys())

    def dtype(self, name):
        return self.meta[name]["dtype"]

    def shape(self, name):
        return tuple(self.meta[name]["shape"])

    def raw(self, name):
        info = self.meta[name]
        dt = info["dtype"]
        if dt not in _DTYPES:
            raise CheckpointError(f"{self.path}: tensor {name}: unsupported dtype {dt}")
        np_dt, width = _DTYPES[dt]
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        if e > self.data_size or e - b != count * width:
            raise CheckpointError(
                f"{self.path}: tensor {name}: data [{b}, {e}) does not fit the file or its "
                f"shape {list(shape)} x {dt}"
            )
        if self._mm is None:
            self._mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        buf = self._mm[self.data_start + b : self.data_start + e]
        return np.frombuffer(buf, dtype=np_dt).reshape(shape)


class Checkpoint:
    """All tensors of a checkpoint directory, by name."""

    def __init__(self, model_dir):
        self.dir = model_dir
        single = os.path.join(model_dir, "model.safetensors")
        index = os.path.join(model_dir, "model.safetensors.index.json")
        self.where = {}
        files = {}
        if os.path.exists(index):
            try:
                with open(index) as f:
                    weight_map = json.load(f)["weight_map"]
            except (OSError, json.JSONDecodeError, KeyError) as e:
                raise CheckpointError(f"{index}: bad index: {e}") from e
            for name, shard in weight_map.items():
                if shard not in files:
                    files[shard] = SafetensorsFile(os.path.join(model_dir, shard))
                if name not in files[shard].meta:
                    raise CheckpointError(f"{index}: tensor {name} not found in shard {shard}")
                self.where[name] = files[shard]
        elif os.path.exists(single):
            st = SafetensorsFile(single)
            for name in st.names():
                self.where[name] = st
        else:
            raise CheckpointError(
                f"{model_dir}: no model.safetensors or model.safetensors.index.json"
            )

    def has(self, name):
        return name in self.where

    def _get(self, name, dtype=None, shape=None):
        if name not in self.where:
            raise CheckpointError(f"{self.dir}: missing tensor {name}")
        st = self.where[name]
        if dtype is not None and st.dtype(name) != dtype:
            raise CheckpointError(f"tensor {name}: dtype {st.dtype(name)}, expected {dtype}")
        if shape is not None and st.shape(name) != tuple(shape):
            raise CheckpointError(
                f"tensor {name}: shape {list(st.shape(name))}, expected {list(shape)}"
            )
        return st.raw(name)

    def bf16(self, name, shape=None):
        """A BF16 tensor as float32 values."""
        return bf16_from_bits(self._get(name, "BF16", shape))

    def f32(self, name, shape=None):
        return np.array(self._get(name, "F32", shape), dtype=np.float32)

    def fp8(self, name, shape):
        """FP8 E4M3 weight [N, K] + UE8M0 scale [ceil(N/32), ceil(K/32)] (raw codes)."""
        n, k = shape
        w = self._get(name + ".weight", "F8_E4M3", (n, k))
        s = self._get(name + ".scale", "F8_E8M0", ((n + 31) // 32, (k + 31) // 32))
        return w, s

    def fp4(self, name, shape):
        """Packed FP4 weight [N, K/2] (I8) + UE8M0 scale [N, K/32] (raw codes)."""
        n, k = shape
        w = self._get(name + ".weight", "I8", (n, k // 2))
        s = self._get(name + ".scale", "F8_E8M0", (n, k // 32))
        return w, s

    def u8(self, name, dtype, shape):
        return self._get(name, dtype, shape)


def load_config(model_dir):
    """config.json -> (text_config dict, top-level dict)."""
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read: {e}") from e
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: bad JSON: {e}") from e
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{path}: not a JSON object")
    text = cfg.get("text_config", cfg)
    q = cfg.get("quantization_config", {})
    if q:
        wbs = q.get("weight_block_size")
        if wbs is not None and list(wbs) != [32, 32]:
            raise CheckpointError(
                f"{path}: quantization_config.weight_block_size {wbs}, need [32, 32]"
            )
        if q.get("scale_fmt", "ue8m0") != "ue8m0":
            raise CheckpointError(f"{path}: quantization_config.scale_fmt {q.get('scale_fmt')}")
    return text, cfg
