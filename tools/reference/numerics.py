"""Bit-exact number formats and rounding helpers of the cedar reference arithmetic.

Everything here follows docs/NUMERICS.md (sections R, Q, T and the top-k rule). Values are kept
as numpy float32 arrays; a "bf16 value" is a float32 whose low 16 bits are zero. numpy float32
elementwise operations are IEEE single operations (correctly rounded, no FMA contraction), so a
line like `a * b` on two float32 arrays is exactly the fp32 multiply the contract asks for.
"""

import numpy as np

F32 = np.float32
F64 = np.float64

FP8_MAX = F32(448.0)
FP4_MAX = F32(6.0)
# kernel.py multiplies by the reciprocal held as an fp32 constant (fp8_max_inv / fp4_max_inv)
FP8_MAX_INV = F32(1.0 / 448.0)
FP4_MAX_INV = F32(1.0 / 6.0)


def f32(x):
    """Round to fp32 (round-to-nearest-even), returning a float32 array."""
    return np.asarray(x).astype(F32)


# ----------------------------------------------------------------------------------------------
# bf16


def bf16(x):
    """fp32 -> bf16 value (RNE), kept in a float32 array. Input of another dtype is first rounded
    to fp32 (callers that need a double rounding f64->f32->bf16 rely on exactly that)."""
    a = np.ascontiguousarray(np.asarray(x, dtype=F32))
    bits = a.view(np.uint32).astype(np.uint64)
    lsb = (bits >> np.uint64(16)) & np.uint64(1)
    rounded = ((bits + np.uint64(0x7FFF) + lsb) & np.uint64(0xFFFF0000)).astype(np.uint32)
    nan = np.isnan(a)
    if nan.any():  # keep NaN a NaN (the carry above could turn some payloads into inf)
        rounded = np.where(nan, np.uint32(0x7FC00000), rounded)
    return rounded.view(F32)


def bf16_from_bits(u16):
    """Raw bf16 storage (uint16) -> float32 values."""
    return (np.asarray(u16, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(F32)


# ----------------------------------------------------------------------------------------------
# FP8 E4M3 (fn variant: no infinities, max 448, 0x7F / 0xFF are NaN)


def _e4m3_table():
    vals = np.zeros(256, dtype=F64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> 3) & 0xF
        m = code & 0x7
        if e == 0xF and m == 0x7:
            vals[code] = np.nan
        elif e == 0:
            vals[code] = sign * (m / 8.0) * 2.0**-6
        else:
            vals[code] = sign * (1.0 + m / 8.0) * 2.0 ** (e - 7)
    return vals.astype(F32)


E4M3_TABLE = _e4m3_table()  # code -> value (fp32, exact)
_E4M3_POS = E4M3_TABLE[:127].astype(F64)  # codes 0..126: the finite non-negative values, ascending


def e4m3_decode(codes):
    return E4M3_TABLE[np.asarray(codes, dtype=np.uint8)]


def e4m3_encode(x):
    """fp32 -> E4M3 code (uint8): clamp to [-448, 448], then round to nearest, ties to the even
    code. The sign is kept (-0.0 -> 0x80)."""
    x = np.asarray(x, dtype=F32)
    a = np.minimum(np.abs(x), FP8_MAX).astype(F64)
    hi = np.searchsorted(_E4M3_POS, a, side="left")  # _E4M3_POS[hi-1] < a <= _E4M3_POS[hi]
    hi = np.minimum(hi, 126)
    lo = np.maximum(hi - 1, 0)
    d_lo = a - _E4M3_POS[lo]  # exact: both are fp32 values of nearby magnitude
    d_hi = _E4M3_POS[hi] - a
    code = np.where(d_lo < d_hi, lo, hi)
    tie = d_lo == d_hi
    code = np.where(tie, np.where(lo % 2 == 0, lo, hi), code)
    code = np.where(a == _E4M3_POS[hi], hi, code)
    sign = np.signbit(x).astype(np.uint8) << np.uint8(7)
    return code.astype(np.uint8) | sign


def e4m3_round(x):
    """E4M3(x) as an fp32 value: clamp to [-448, 448], then round to nearest even on the E4M3
    grid of the value's binade (quantum 2^(e-3); 2^-9 in the subnormal range). Arithmetic twin of
    e4m3_encode (the tests check that both agree)."""
    x = np.asarray(x, dtype=F32)
    a = np.minimum(np.abs(x), FP8_MAX)
    _, E = np.frexp(a)  # a = f * 2^E, f in [0.5, 1)
    quantum = np.ldexp(np.ones_like(a), np.maximum(E - 1, -6) - 3)
    q = np.rint(a / quantum) * quantum  # exact division and product; rint is half-to-even
    return np.copysign(q, x).astype(F32)


# ----------------------------------------------------------------------------------------------
# FP4 E2M1 and UE8M0

E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=F32)
FP4_TABLE = np.concatenate([E2M1_GRID, -E2M1_GRID]).astype(F32)  # 4-bit code -> value
_E2M1_MIDS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=F32)
# at an exact midpoint the even code wins: it is the upper one for 0.75, 1.75 and 3.5
_E2M1_TIE_UP = np.array([False, True, False, True, False, True, False])


def e2m1_encode(x):
    """fp32 in [-6, 6] -> 4-bit E2M1 code (bit 3 = sign), RNE with ties to the even code."""
    x = np.asarray(x, dtype=F32)
    mag = np.abs(x)[..., None]
    code = (mag > _E2M1_MIDS).sum(-1) + ((mag == _E2M1_MIDS) & _E2M1_TIE_UP).sum(-1)
    return code.astype(np.uint8) | (np.signbit(x).astype(np.uint8) << np.uint8(3))


def e2m1_round(x):
    return FP4_TABLE[e2m1_encode(x)]


def unpack_fp4(packed):
    """Packed E2M1 bytes [..., K/2] -> fp32 values [..., K]; element 2j sits in the low nibble."""
    b = np.asarray(packed).view(np.uint8)
    vals = np.stack([FP4_TABLE[b & 0x0F], FP4_TABLE[b >> 4]], axis=-1)
    return vals.reshape(*b.shape[:-1], b.shape[-1] * 2)


def ue8m0_decode(codes):
    """UE8M0 scale code c -> 2^(c-127) as fp32 (code 255 is NaN)."""
    c = np.asarray(codes, dtype=np.uint8).astype(F64)
    v = np.exp2(c - 127.0)
    v = np.where(c == 255, np.nan, v)
    return v.astype(F32)


def fast_round_scale(amax, inv):
    """2^ceil(log2(amax * inv)) exactly as kernel.py: from the exponent and mantissa bits of the
    fp32 product (the exponent field goes up by one unless the mantissa is zero)."""
    t = np.ascontiguousarray(np.asarray(amax, dtype=F32) * F32(inv))
    bits = t.view(np.int32)
    e = (bits >> 23) & 0xFF
    m = bits & 0x7FFFFF
    log2_ceil = e - 127 + (m != 0).astype(np.int32)
    return ((log2_ceil + 127).astype(np.int32) << 23).view(F32)


# ----------------------------------------------------------------------------------------------
# act_quant / fp4_act_quant (kernel.py)


def act_quant(x, block_size=32):
    """FP8 activation quantization with UE8M0 scales. x: bf16 values [..., K].
    Returns (q, s): q the E4M3 values (fp32) [..., K], s the power-of-two scales [..., K/32]."""
    x = np.asarray(x, dtype=F32)
    K = x.shape[-1]
    assert K % block_size == 0, f"act_quant: K={K} not a multiple of {block_size}"
    xg = x.reshape(*x.shape[:-1], K // block_size, block_size)
    amax = np.maximum(np.abs(xg).max(-1), F32(1e-4))
    s = fast_round_scale(amax, FP8_MAX_INV)
    q = e4m3_round(np.clip(xg / s[..., None], -FP8_MAX, FP8_MAX))
    return q.reshape(x.shape), s


def act_quant_inplace(x, block_size=32):
    """The fused quant+dequant used for the window KV: x <- bf16(q * s) (exact)."""
    q, s = act_quant(x, block_size)
    shp = q.shape
    qg = q.reshape(*shp[:-1], shp[-1] // block_size, block_size)
    return bf16(qg * s[..., None]).reshape(shp)


def fp4_act_quant(x, block_size, scale_fmt):
    """FP4 quant + dequant (the reference only ever uses it in place).
    scale_fmt "e4m3": per-16 E4M3 scale (compressed main KV); "ue8m0": per-32 power of two
    (indexer q and k). Returns the dequantized bf16 values."""
    x = np.asarray(x, dtype=F32)
    K = x.shape[-1]
    assert K % block_size == 0, f"fp4_act_quant: K={K} not a multiple of {block_size}"
    xg = x.reshape(*x.shape[:-1], K // block_size, block_size)
    amax = np.abs(xg).max(-1)
    if scale_fmt == "e4m3":
        amax = np.maximum(amax, F32(6 * 2.0**-9))
        s = e4m3_round(amax / FP4_MAX)
    elif scale_fmt == "ue8m0":
        amax = np.maximum(amax, F32(6 * 2.0**-126))
        s = fast_round_scale(amax, FP4_MAX_INV)
    else:
        raise ValueError(f"fp4_act_quant: unknown scale format {scale_fmt!r}")
    v = np.clip(xg / s[..., None], -FP4_MAX, FP4_MAX)
    y = bf16(e2m1_round(v) * s[..., None])
    return y.reshape(x.shape)


# ----------------------------------------------------------------------------------------------
# exact reductions (NUMERICS.md §R)


def xsum(terms, axis=-1):
    """Sum fp32 terms in float64, round once to fp32 (+0.0 for a zero result)."""
    r = np.sum(np.asarray(terms, dtype=F32), axis=axis, dtype=F64).astype(F32)
    return r + F32(0.0)  # -0.0 + 0.0 = +0.0


def mean(terms, axis=-1):
    t = np.asarray(terms, dtype=F32)
    n = t.shape[axis]
    return (np.sum(t, axis=axis, dtype=F64) / F64(n)).astype(F32) + F32(0.0)


def dot_exact(a, b):
    """a[..., K] . b[N, K] -> [..., N] fp32 with exact products (canonical rule 1, as an FMA-based
    BLAS forms them): the products of two fp32 values are exact in float64, so the float64 matmul
    is the exact sum in practice, rounded once to fp32. Used for every non-block-scaled GEMM,
    mHC's fp32 hc_fn x bf16 stream included."""
    a64 = np.asarray(a, dtype=F64)
    b64 = np.asarray(b, dtype=F64)
    return (a64 @ b64.T).astype(F32) + F32(0.0)


# ----------------------------------------------------------------------------------------------
# transcendentals (NUMERICS.md §T): double evaluation, one rounding to fp32


def _d(x):
    return np.asarray(x, dtype=F32).astype(F64)


def _ld(x):
    return np.asarray(x, dtype=F32).astype(np.longdouble)


def _correctly_rounded(d, wide, *args):
    """One correctly rounded fp32 result from a float64 evaluation d: rounding d to fp32 is right
    unless d lies within 8 double ulps of an fp32 rounding midpoint, where the double's own error
    can pick the wrong side (glibc's 1/(1+exp(-x)) lands exactly on a midpoint for x = 0x372e0000,
    0x37360000, 0x374e0000; canonical-arithmetic rule 4); there the long-double evaluation
    wide(*args) decides. Same rule as the engine's fmath::correctly_rounded."""
    d = np.asarray(d, dtype=F64)
    r = d.astype(F32)
    rd = r.astype(F64)
    with np.errstate(invalid="ignore", over="ignore"):
        toward = np.where(d > rd, F32(np.inf), F32(-np.inf)).astype(F32)
        nb = np.nextafter(r, toward)
        mid = (rd + nb.astype(F64)) * 0.5
        ulp = np.spacing(np.abs(d))
        near = (rd != d) & np.isfinite(d) & (np.abs(d - mid) <= 8.0 * ulp)
    if near.any():
        r = np.array(r, dtype=F32, copy=True)
        sub = [np.broadcast_to(np.asarray(a), d.shape)[near] for a in args]
        with np.errstate(over="ignore", divide="ignore"):
            r[near] = np.asarray(wide(*sub)).astype(F32)
    return r[()]


def exp(x):
    with np.errstate(over="ignore"):
        return _correctly_rounded(np.exp(_d(x)), lambda v: np.exp(_ld(v)), x)


def sqrt(x):
    return np.sqrt(_d(x)).astype(F32)  # double sqrt rounded to fp32 is never a double rounding


def rsqrt(x):
    with np.errstate(divide="ignore"):
        return _correctly_rounded(1.0 / np.sqrt(_d(x)), lambda v: 1.0 / np.sqrt(_ld(v)), x)


def sigmoid(x):
    with np.errstate(over="ignore"):
        return _correctly_rounded(
            1.0 / (1.0 + np.exp(-_d(x))), lambda v: 1.0 / (1.0 + np.exp(-_ld(v))), x
        )


def silu(x):
    d = _d(x)
    with np.errstate(over="ignore"):
        return _correctly_rounded(d / (1.0 + np.exp(-d)), lambda v: _ld(v) / (1.0 + np.exp(-_ld(v))), x)


def softplus(x):
    d = _d(x)
    with np.errstate(over="ignore"):
        sp = _correctly_rounded(
            np.log1p(np.exp(np.minimum(d, 20.0))), lambda v: np.log1p(np.exp(_ld(v))), x
        )
    return np.where(d > 20.0, d.astype(F32), sp).astype(F32)


def cos(x):
    return _correctly_rounded(np.cos(_d(x)), lambda v: np.cos(_ld(v)), x)


def sin(x):
    return _correctly_rounded(np.sin(_d(x)), lambda v: np.sin(_ld(v)), x)


def pow_(base, e):
    return _correctly_rounded(
        np.power(_d(base), _d(e)), lambda b, v: np.power(_ld(b), _ld(v)), base, e
    )


# ----------------------------------------------------------------------------------------------
# top-k rule (torch.topk on CUDA)


def sort_key(x):
    """Integer key whose ascending order is the radix order of the fp32 bit patterns:
    -inf < negative finite < -0.0 < +0.0 < positive finite < +inf."""
    bits = np.ascontiguousarray(np.asarray(x, dtype=F32)).view(np.uint32).astype(np.int64)
    neg = bits >= 0x80000000
    return np.where(neg, 0xFFFFFFFF - bits, bits + 0x80000000)


def topk_rule(values, k, valid=None):
    """Indices of the k best entries along the last axis: value descending in radix order, ties
    broken by the lower index. `valid` (bool, same shape) excludes entries entirely; the caller
    guarantees k <= number of valid entries. Returns int64 [..., k] in selection order."""
    key = sort_key(values)
    if valid is not None:
        key = np.where(valid, key, -1)
    order = np.argsort(-key, axis=-1, kind="stable")
    return order[..., :k]
