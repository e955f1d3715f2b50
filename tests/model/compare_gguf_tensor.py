"""One tensor decoded from a GGUF (`cedar inspect --tensor`) against the release checkpoint's values
decoded by the numpy reference: FP8 weights as E4M3 x UE8M0 (32x32 blocks, or per row for the
Engram table), FP4 experts as E2M1 x UE8M0 per 32, BF16 and F32 as stored. Exit 1 on any
difference (the bf16 conversion is lossless: equality is bit for bit).

  compare_gguf_tensor.py MODEL_DIR RELEASE_NAME DECODED.npy
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "reference"))
from checkpoint import Checkpoint  # noqa: E402
from numerics import bf16_from_bits, e4m3_decode, ue8m0_decode, unpack_fp4  # noqa: E402


def release_values(ck, name):
    st = ck.where[name]
    dtype = st.dtype(name)
    w = st.raw(name)
    if dtype == "BF16":
        return bf16_from_bits(w)
    if dtype == "F32":
        return np.asarray(w, dtype=np.float32)
    sname = name[: -len(".weight")] + ".scale"
    scale = ck.where[sname].raw(sname)
    s = ue8m0_decode(scale).astype(np.float64)
    if dtype == "F8_E4M3":
        v = e4m3_decode(w).astype(np.float64)
        if scale.shape[0] == w.shape[0]:  # per row (the Engram table)
            return (v * np.repeat(s, 32, axis=1)[:, : v.shape[1]]).astype(np.float32)
        full = np.repeat(np.repeat(s, 32, axis=0), 32, axis=1)[: v.shape[0], : v.shape[1]]
        return (v * full).astype(np.float32)
    if dtype == "I8":  # packed FP4
        v = unpack_fp4(w).astype(np.float64)
        return (v * np.repeat(s, 32, axis=1)[:, : v.shape[1]]).astype(np.float32)
    raise SystemExit(f"{name}: dtype {dtype} not handled")


def main():
    model_dir, name, npy = sys.argv[1:4]
    want = release_values(Checkpoint(model_dir), name)
    got = np.load(npy)
    if got.shape != want.shape:
        print(f"{name}: shape {got.shape} != release {want.shape}")
        return 1
    bad = np.count_nonzero(got.view(np.uint32) != want.astype(np.float32).view(np.uint32))
    if bad:
        print(f"{name}: {bad} of {got.size} values differ")
        return 1
    print(f"{name}: {got.size} values identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
