#!/usr/bin/env python3
"""Compare two [T, vocab] float32 .npy logits files: bit equality, argmax, relative L2.

usage: compare_logits.py A.npy B.npy [--rows N] [--label TEXT] [--tolerate-rare]

--rows N compares only the first N rows of both files (a causal model's first N rows do not
depend on later tokens). Exit status 0 when the files agree: bit-identical, or with
--tolerate-rare, relative L2 <= 1e-6 per row and identical argmax everywhere (the rare
double-rounding allowance of canonical-arithmetic.md). Prints one summary line either way.
"""
import argparse
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--label", default="")
    ap.add_argument("--tolerate-rare", action="store_true")
    args = ap.parse_args()
    a = np.load(args.a)
    b = np.load(args.b)
    if a.dtype != np.float32 or b.dtype != np.float32:
        print(f"FAIL {args.label}: dtypes {a.dtype} {b.dtype}, expected float32")
        return 1
    if args.rows is not None:
        if a.shape[0] < args.rows or b.shape[0] < args.rows:
            print(f"FAIL {args.label}: fewer than {args.rows} rows: {a.shape} {b.shape}")
            return 1
        a, b = a[: args.rows], b[: args.rows]
    if a.shape != b.shape:
        print(f"FAIL {args.label}: shapes {a.shape} vs {b.shape}")
        return 1
    if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        print(f"FAIL {args.label}: non-finite logits")
        return 1
    same_bits = a.view(np.uint32) == b.view(np.uint32)
    rows_identical = same_bits.all(axis=1)
    diff = (a.astype(np.float64) - b.astype(np.float64))
    rel = np.sqrt((diff**2).sum(axis=1)) / np.maximum(np.sqrt((b.astype(np.float64) ** 2).sum(axis=1)), 1e-30)
    argmax_same = a.argmax(axis=1) == b.argmax(axis=1)
    n = a.shape[0]
    summary = (f"{args.label}: T={n} rows bit-identical {int(rows_identical.sum())}/{n}, "
               f"argmax same {int(argmax_same.sum())}/{n}, max rel L2 {rel.max():.3e}")
    if rows_identical.all():
        print("OK   " + summary)
        return 0
    first = int(np.argmin(rows_identical))
    if args.tolerate_rare and argmax_same.all() and rel.max() <= 1e-6:
        print("OK~  " + summary + f" (first differing row {first})")
        return 0
    print("FAIL " + summary + f" (first differing row {first}, rel L2 there {rel[first]:.3e})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
