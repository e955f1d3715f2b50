"""OpenBLAS core type for the training process only.

On some of these machines OpenBLAS (under Debian's numpy and torch) detects the wrong core type
and runs a slow or unsuitable kernel. ensure(), called before numpy or torch is imported, tries
the default and a few OPENBLAS_CORETYPE values in child processes: each must pass a float64
self-check (a GEMM on integer-valued matrices, whose exact result is known) and is timed on an
fp32 GEMM; the process then re-executes itself with the fastest correct choice. An explicit
OPENBLAS_CORETYPE is respected, and CEDAR_TRAIN_BLAS_CHOSEN=1 skips the choice (the suite's
smoke test sets it: tests and CI keep the machine's default).
"""

import os
import subprocess
import sys

CANDIDATES = ["", "Haswell", "SkylakeX", "Zen", "Cooperlake", "Sandybridge"]
_MARK = "CEDAR_TRAIN_BLAS_CHOSEN"

_PROBE = r"""
import time, numpy as np
rng = np.random.default_rng(1)
a = rng.integers(-8, 8, size=(192, 160)).astype(np.float64)
b = rng.integers(-8, 8, size=(160, 176)).astype(np.float64)
exact = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float64)
assert np.array_equal(a @ b, exact), "float64 GEMM self-check failed"
x = rng.standard_normal((1024, 256)).astype(np.float32)
y = rng.standard_normal((256, 512)).astype(np.float32)
x @ y
t = time.perf_counter()
for _ in range(20):
    x @ y
print(time.perf_counter() - t)
"""


def probe(coretype):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True,
                             timeout=60, check=True)
        return float(out.stdout.decode().strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError):
        return None


def ensure():
    if os.environ.get(_MARK) or "OPENBLAS_CORETYPE" in os.environ:
        return
    results = {c: probe(c) for c in CANDIDATES}
    ok = {c: t for c, t in results.items() if t is not None}
    env = dict(os.environ)
    env[_MARK] = "1"
    if ok:
        best = min(ok, key=ok.get)
        desc = best or "default"
        print(f"blas_select: OPENBLAS_CORETYPE={desc} "
              + " ".join(f"{c or 'default'}={t * 1e3:.0f}ms" for c, t in ok.items()), flush=True)
        if best:
            env["OPENBLAS_CORETYPE"] = best
    os.execve(sys.executable, [sys.executable] + sys.argv, env)
