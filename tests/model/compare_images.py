"""Images written with PIL in every layout the decoders handle, each run through `cedar image`
and the reference processor (tools/reference/image_processor.py): the plan (sizes, grids, token
count), the letterboxed pixels and the bf16 patches must be equal, byte for byte. Corrupt and
truncated files must be a clean error (exit 1, a message naming the format), never a crash.

    /usr/bin/python3 compare_images.py CEDAR_BIN SOURCE_DIR WORK_DIR   # exit 1 on any failure
"""

import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
from PIL import Image

cedar, src, work = sys.argv[1:4]
sys.path.insert(0, os.path.join(src, "tools", "reference"))
import image_processor as ref  # noqa: E402

rng = np.random.default_rng(7)
fails = 0


def noise(w, h, smooth):
    if not smooth:
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 255 // max(1, w - 1)), (y * 255 // max(1, h - 1)),
                     ((x + y) * 7) % 256], axis=-1).astype(np.uint8)


def save(name, img, **kw):
    path = os.path.join(work, name)
    img.save(path, **kw)
    return path


def write_png(name, a, color_type, interlace=False):
    """A PNG PIL cannot write: 16-bit samples (a is uint16) or Adam7 interlacing (filter 0)."""
    h, w = a.shape[:2]
    depth = 16 if a.dtype == np.uint16 else 8
    raw = a.astype(">u2").tobytes() if depth == 16 else a.tobytes()
    row = len(raw) // h
    px = row // w
    def scan(y0, dy, x0, dx):
        out = b""
        for y in range(y0, h, dy):
            line = raw[y * row:(y + 1) * row]
            sub = b"".join(line[x * px:(x + 1) * px] for x in range(x0, w, dx))
            if sub:
                out += b"\0" + sub
        return out
    if interlace:
        data = b"".join(scan(*p) for p in ((0, 8, 0, 8), (0, 8, 4, 8), (4, 8, 0, 4), (0, 4, 2, 4),
                                          (2, 4, 0, 2), (0, 2, 1, 2), (1, 2, 0, 1)))
    else:
        data = scan(0, 1, 0, 1)
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 1 if interlace else 0)
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(data))
                + chunk(b"IEND", b""))
    return path


def cases():
    sizes = [(224, 224), (544, 544), (1024, 768), (1920, 1080), (400, 300), (1, 1), (3, 500),
             (5000, 20), (2000, 2000), (17, 3000), (543, 545), (1000, 1)]
    for i, (w, h) in enumerate(sizes):
        rgb = Image.fromarray(noise(w, h, smooth=i % 2 == 1))
        yield f"rgb{w}x{h}.png", save(f"rgb{w}x{h}.png", rgb)
    base = Image.fromarray(noise(333, 250, smooth=False))
    smooth = Image.fromarray(noise(333, 250, smooth=True))
    rgba = base.copy()
    rgba.putalpha(Image.fromarray(rng.integers(0, 256, (250, 333), dtype=np.uint8)))
    yield "rgba.png", save("rgba.png", rgba)
    yield "grey.png", save("grey.png", base.convert("L"))
    yield "grey_alpha.png", save("grey_alpha.png", rgba.convert("LA"))
    yield "palette.png", save("palette.png", smooth.convert("P", palette=Image.ADAPTIVE, colors=50))
    yield "bilevel.png", save("bilevel.png", base.convert("1"))
    yield "interlaced.png", write_png("interlaced.png", np.asarray(base), 2, interlace=True)
    wide = rng.integers(0, 65536, (250, 333, 3)).astype(np.uint16)
    yield "rgb16.png", write_png("rgb16.png", wide, 2)
    yield "rgba16.png", write_png("rgba16.png", rng.integers(0, 65536, (50, 70, 4))
                                  .astype(np.uint16), 6)
    yield "grey16.png", write_png("grey16.png", rng.integers(0, 600, (60, 80)).astype(np.uint16), 0)
    for q, sub in ((90, 0), (75, 2), (50, 1)):
        yield f"q{q}s{sub}.jpg", save(f"q{q}s{sub}.jpg", smooth, quality=q, subsampling=sub)
    yield "noise.jpg", save("noise.jpg", base, quality=85)
    yield "grey.jpg", save("grey.jpg", smooth.convert("L"), quality=80)
    yield "progressive.jpg", save("progressive.jpg", smooth, quality=80, progressive=True)
    yield "lossy.webp", save("lossy.webp", smooth, quality=70)
    yield "lossless.webp", save("lossless.webp", base, lossless=True)
    yield "alpha.webp", save("alpha.webp", rgba, quality=80)
    frames = [Image.fromarray(noise(120, 90, smooth=True)), base.resize((120, 90))]
    yield "anim.webp", save("anim.webp", frames[0], save_all=True, append_images=frames[1:],
                            duration=100)
    yield "still.gif", save("still.gif", smooth.convert("P", palette=Image.ADAPTIVE))
    yield "interlaced.gif", save("interlaced.gif", base.convert("P", palette=Image.ADAPTIVE),
                                 interlace=True)
    yield "anim.gif", save("anim.gif", frames[0].convert("P", palette=Image.ADAPTIVE),
                           save_all=True, append_images=[frames[1].convert("P")], duration=100)


def run_cedar(path):
    p = subprocess.run([cedar, "image", "--json", "--patches", path + ".c_patches.npy",
                        "--pixels", path + ".c_pixels.npy", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip())
    return json.loads(p.stdout)


def compare(name, path):
    global fails
    want_plan, want_px, want_patches = ref.process(path)
    try:
        got_plan = run_cedar(path)
    except RuntimeError as e:
        print(f"  {name}: cedar failed: {e}")
        fails += 1
        return
    got_plan.pop("format")
    problems = []
    if got_plan != want_plan:
        problems.append(f"plan {got_plan} != {want_plan}")
    px = np.load(path + ".c_pixels.npy")
    if px.shape != want_px.shape or (px != want_px).any():
        n = (px != want_px).sum() if px.shape == want_px.shape else "shape"
        problems.append(f"pixels differ ({n})")
    pt = np.load(path + ".c_patches.npy")
    if pt.shape != want_patches.shape or (pt != want_patches).any():
        problems.append("patches differ")
    if problems:
        print(f"  {name}: " + "; ".join(problems))
        fails += 1
    else:
        print(f"  {name}: ok ({want_plan['tokens']} tokens)")


for name, path in cases():
    compare(name, path)

# the spec's worked examples (v41-extras.md §3.1)
for (w, h), tokens in {(224, 224): 184, (544, 544): 184, (1024, 768): 496,
                       (1920, 1080): 968}.items():
    got = run_cedar(os.path.join(work, f"rgb{w}x{h}.png"))["tokens"]
    if got != tokens:
        print(f"  {w}x{h}: {got} tokens, the spec says {tokens}")
        fails += 1

# hostile files: truncated, corrupt, not an image -- a clean error from cedar, never a crash
good = {n: open(os.path.join(work, n), "rb").read()
        for n in ("noise.jpg", "rgba.png", "lossy.webp", "still.gif")}
bad = {"empty": b"", "text": b"hello, not an image", "png_magic_only": b"\x89PNG\r\n\x1a\n"}
for n, b in good.items():
    bad[n + ".truncated"] = b[: len(b) // 2]
    flipped = bytearray(b)
    for k in range(40, len(flipped), 97):
        flipped[k] ^= 0x5A
    bad[n + ".corrupt"] = bytes(flipped)
huge = bytearray(good["rgba.png"])
huge[16:24] = (100000).to_bytes(4, "big") + (100000).to_bytes(4, "big")  # IHDR 100000^2
bad["png_huge_header"] = bytes(huge)
for n, b in bad.items():
    path = os.path.join(work, "bad_" + n)
    open(path, "wb").write(b)
    p = subprocess.run([cedar, "image", path], capture_output=True, text=True)
    crashed = p.returncode < 0 or p.returncode > 1
    if crashed or (p.returncode == 1 and "error" not in p.stderr):
        print(f"  {n}: exit {p.returncode}: {p.stderr.strip()[:200]}")
        fails += 1
    elif n.endswith(".truncated") or n in ("empty", "text", "png_magic_only", "png_huge_header"):
        if p.returncode != 1:
            print(f"  {n}: accepted")
            fails += 1
    # a corrupt file may still decode (a flipped byte in entropy-coded data); it must not crash

print(f"{fails} failures")
sys.exit(1 if fails else 0)
