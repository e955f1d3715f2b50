"""The release's image processor (v41-extras.md §3.1), the oracle of `cedar image`.

Written from the structure of the release's `inference/image_processor.py`: the decoded image
(PIL, `convert("RGB")`) is planned to a pixel size that is a multiple of the patch, at least
min_pixels and at most max_tokens LLM tokens, letterboxed onto it with `ImageOps.pad` (bicubic,
grey 127), normalised x/255 -> (x - 0.5)/0.5 in fp32, rounded to bf16 and cut into patches in
(channel, row, col) order. Needs Debian's python3-pil besides numpy.

    /usr/bin/python3 tools/reference/image_processor.py --image F [--patches P.npy]
        [--pixels X.npy]           # prints the plan as one JSON line
"""

import argparse
import json
import math
import sys
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageOps

from numerics import F32, bf16


@dataclass
class Geometry:
    patch: int = 14
    downsample: int = 3
    max_tokens: int = 1024
    min_pixels: int = 295936
    max_wh_ratio: float = None


def tokens_of(n_h, n_w):
    return n_h * (n_w + 1) + 2


def token_grid(best_h, best_w, g):
    """ref: llm_grid"""
    return (math.ceil((best_h // g.patch) / g.downsample),
            math.ceil((best_w // g.patch) / g.downsample))


def fit_to_tokens(h, w, g):
    """ref: solve_resize_ratio -- the largest aspect-preserving size whose grid fits."""
    ratio = h / w
    w_max = math.sqrt((g.max_tokens - 2) / ratio + 0.25) - 0.5
    h_max = w_max * ratio
    cell = g.patch * g.downsample
    if w_max < 1.0:
        return (g.max_tokens - 2) // 2 * cell, cell
    if h_max < 1.0:
        return cell, (g.max_tokens - 3) * cell
    beta = min(math.floor(w_max) * cell / w, math.floor(h_max) * cell / h)
    return (math.floor(h * beta / g.patch) * g.patch, math.floor(w * beta / g.patch) * g.patch)


def plan(width, height, g=Geometry()):
    """ref: plan_image_grid + safe_resize -> dict of the sizes and grids."""
    w, h = width, height
    if g.max_wh_ratio is not None and w > h * g.max_wh_ratio:
        w = h * g.max_wh_ratio
    if 0 < w * h < g.min_pixels:
        up = (g.min_pixels / (w * h)) ** 0.5
        w, h = int(w * up), int(h * up)
    best_w = math.ceil(w / g.patch) * g.patch
    best_h = math.ceil(h / g.patch) * g.patch
    n_h, n_w = token_grid(best_h, best_w, g)
    if tokens_of(n_h, n_w) > g.max_tokens:
        best_h, best_w = fit_to_tokens(h, w, g)
        n_h, n_w = token_grid(best_h, best_w, g)
    return {"width": width, "height": height, "best_width": best_w, "best_height": best_h,
            "n_vit_h": best_h // g.patch, "n_vit_w": best_w // g.patch,
            "n_llm_h": n_h, "n_llm_w": n_w, "tokens": tokens_of(n_h, n_w)}


def process(path, g=Geometry()):
    """-> (plan, letterboxed uint8 [H, W, 3], bf16 bits uint16 [patches, 3 * patch * patch])"""
    with Image.open(path) as src:
        img = src.convert("RGB")
    p = plan(img.width, img.height, g)
    size = (p["best_width"], p["best_height"])
    if g.max_wh_ratio is not None and img.width >= g.max_wh_ratio * img.height:
        img = img.resize(size)
    else:
        img = ImageOps.pad(img, size, color=(127, 127, 127))
    pixels = np.asarray(img, dtype=np.uint8)
    x = pixels.astype(F32) / F32(255)
    x = (x - F32(0.5)) / F32(0.5)
    bits = (bf16(x).view(np.uint32) >> np.uint32(16)).astype(np.uint16)  # [H, W, 3]
    P, nh, nw = g.patch, p["n_vit_h"], p["n_vit_w"]
    patches = bits.reshape(nh, P, nw, P, 3).transpose(0, 2, 4, 1, 3).reshape(nh * nw, 3 * P * P)
    return p, pixels, np.ascontiguousarray(patches)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--image", required=True)
    ap.add_argument("--patches")
    ap.add_argument("--pixels")
    a = ap.parse_args()
    try:
        p, pixels, patches = process(a.image)
    except (OSError, ValueError) as e:
        print(f"image_processor.py: error: {a.image}: {e}", file=sys.stderr)
        return 1
    if a.patches:
        np.save(a.patches, patches)
    if a.pixels:
        np.save(a.pixels, pixels)
    print(json.dumps(p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
