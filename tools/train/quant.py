"""The quantizers of docs/NUMERICS.md in torch, for quantization-aware training.

Each function returns the dequantized value the engine computes with (same grids, same scale
rules, same ties as tools/reference/numerics.py); the training forward wraps it in ste() (forward
q(x), backward identity); the *_parts functions give export.py the values and scales apart. Scales are powers of two (UE8M0) from 2^ceil(log2(t)),
except the compressed main KV's per-16 E4M3 scale. Checked end to end, not per function: the
exported checkpoint (whose codes these functions pick) against the trainer's QAT forward
(check_export.py, in tests/model/test_train_smoke.sh).
"""

import torch

FP8_MAX = 448.0
FP4_MAX = 6.0


def ste(x, q):
    """Forward q, backward the identity of x."""
    return x + (q - x).detach()


def pow2_ceil(t):
    """2^ceil(log2(t)) for positive fp32 t (kernel.py fast_round_scale on the product t)."""
    m, e = torch.frexp(t)  # t = m * 2^e, m in [0.5, 1)
    e = torch.where(m == 0.5, e - 1, e)
    return torch.ldexp(torch.ones_like(t), e)


def e4m3_round(x):
    """fp32 -> nearest E4M3 value (clamped to +-448, ties to even), as fp32."""
    a = torch.clamp(x.abs(), max=FP8_MAX)
    _, e = torch.frexp(a)
    quantum = torch.ldexp(torch.ones_like(a), torch.clamp(e - 1, min=-6) - 3)
    return torch.copysign(torch.round(a / quantum) * quantum, x)


def e2m1_round(x):
    """fp32 in [-6, 6] -> nearest E2M1 value (grid 0 .5 1 1.5 2 3 4 6, ties to the even code)."""
    a = x.abs()
    quantum = torch.where(a < 2, 0.5, torch.where(a < 4, 1.0, 2.0))
    return torch.copysign(torch.clamp(torch.round(a / quantum) * quantum, max=FP4_MAX), x)


def bf16_round(x):
    return x.to(torch.bfloat16).to(torch.float32)


def _blocks(x, block):
    return x.reshape(*x.shape[:-1], x.shape[-1] // block, block)


def act_quant(x):
    """kernel.py act_quant + dequant: per 32 along the last axis, UE8M0 scale, E4M3 values (the
    same rule as the Engram table's rows)."""
    return fp8_rows(x)


def fp4_act_quant(x, block, scale_fmt):
    """kernel.py fp4_act_quant + dequant: "e4m3" per-16 E4M3 scale (compressed main KV),
    "ue8m0" per-32 power of two (indexer q and k); the result is rounded to bf16."""
    xg = _blocks(x, block)
    amax = xg.abs().amax(-1, keepdim=True)
    if scale_fmt == "e4m3":
        s = e4m3_round(torch.clamp(amax, min=6 * 2.0**-9) / FP4_MAX)
    else:
        s = pow2_ceil(torch.clamp(amax, min=6 * 2.0**-126) * (1.0 / FP4_MAX))
    y = e2m1_round(torch.clamp(xg / s, -FP4_MAX, FP4_MAX)) * s
    return bf16_round(y.reshape(x.shape))


def fp8_weight_parts(w):
    """[N, K] -> (E4M3 values [N, K], UE8M0 scale of each 32x32 block [ceil(N/32), K/32])."""
    n, k = w.shape
    npad = -n % 32
    wp = torch.nn.functional.pad(w, (0, 0, 0, npad)) if npad else w
    g = wp.reshape((n + npad) // 32, 32, k // 32, 32)
    amax = torch.clamp(g.abs().amax(dim=(1, 3), keepdim=True), min=1e-4)
    s = pow2_ceil(amax * (1.0 / FP8_MAX))
    v = e4m3_round(torch.clamp(g / s, -FP8_MAX, FP8_MAX))
    return v.reshape(n + npad, k)[:n], s.reshape((n + npad) // 32, k // 32)


def fp8_weight(w):
    """The dequantized FP8 weight (values times their block's scale)."""
    v, s = fp8_weight_parts(w)
    full = s.repeat_interleave(32, 0)[: w.shape[0]].repeat_interleave(32, 1)
    return v * full


def _row_blocks_parts(w, vmax, rnd):
    g = _blocks(w, 32)
    amax = torch.clamp(g.abs().amax(-1, keepdim=True), min=1e-4)
    s = pow2_ceil(amax * (1.0 / vmax))
    v = rnd(torch.clamp(g / s, -vmax, vmax))
    return v.reshape(w.shape), s.squeeze(-1)


def fp4_weight_parts(w):
    """Routed expert [N, K] -> (E2M1 values, UE8M0 scale per (row, 32 K) [N, K/32])."""
    return _row_blocks_parts(w, FP4_MAX, e2m1_round)


def fp8_rows_parts(w):
    """[..., K] -> (E4M3 values, UE8M0 scale per 32 along K [..., K/32]): the Engram table's rows
    and every FP8 activation."""
    return _row_blocks_parts(w, FP8_MAX, e4m3_round)


def _dequant_rows(parts):
    v, s = parts
    return (_blocks(v, 32) * s.unsqueeze(-1)).reshape(v.shape)


def fp4_weight(w):
    return _dequant_rows(fp4_weight_parts(w))


def fp8_rows(w):
    return _dequant_rows(fp8_rows_parts(w))
