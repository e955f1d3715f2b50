"""Engram: the compressed token map, the n-gram hash ids and the gated write into the stream.

Follows docs/NUMERICS.md §E and the release's engram.py (EngramLayout, NgramHashState,
build_compressed_token_map, compute_hash_multipliers) and model.py Engram / ParallelEngramEmbedding.
The token map is rebuilt here in plain Python from tokenizer.json, without the `tokenizers`
library: single-token decode through the byte-level decoder, then the normalizer sequence
NFKC -> NFD -> strip Marks -> lowercase -> collapse [ \\t\\r\\n]+ -> keep a lone space -> strip.
"""

import hashlib
import json
import os
import re
import unicodedata

import numpy as np

import numerics as nx
from kernel import FP8Linear
from numerics import F32, bf16

# ----------------------------------------------------------------------------------------------
# token map


def _bytes_to_unicode():
    """GPT-2's byte <-> printable-unicode table used by the ByteLevel pre-tokenizer/decoder."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\u00a1"), ord("\u00ac") + 1))
        + list(range(ord("\u00ae"), ord("\u00ff") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


CHAR_BYTES = _bytes_to_unicode()

# Rust's char::is_whitespace (the Unicode White_Space property), which HF's Strip uses. Python's
# str.strip() would also remove U+001C..U+001F, which are not White_Space.
RUST_WHITESPACE = (
    "\u0009\u000a\u000b\u000c\u000d\u0020\u0085\u00a0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)

_WS_RUN = re.compile(r"[ \t\r\n]+")
_SENTINEL = "\ue000"


def bytelevel_decode(token):
    """HF ByteLevel decoder for one token: map every char back to its byte when all of them are in
    the table, otherwise keep the token's own UTF-8 bytes (added tokens); then lossy UTF-8."""
    try:
        raw = bytes(CHAR_BYTES[c] for c in token)
    except KeyError:
        raw = token.encode("utf-8")
    return raw.decode("utf-8", errors="replace")


def normalize(text):
    """The engram normalizer (ref: engram.py build_compressed_token_map)."""
    t = unicodedata.normalize("NFKC", text)
    t = unicodedata.normalize("NFD", t)
    # StripAccents drops every combining mark: General_Category Mn, Mc and Me
    t = "".join(c for c in t if not unicodedata.category(c).startswith("M"))
    # Lowercase maps char by char (Rust char::to_lowercase): no final-sigma context rule
    t = "".join(c.lower() for c in t)
    t = _WS_RUN.sub(" ", t)
    if t == " ":  # Replace(Regex("^ $"), sentinel): a token that is one space survives Strip
        t = _SENTINEL
    t = t.strip(RUST_WHITESPACE)
    return t.replace(_SENTINEL, " ")


def id_to_token_table(tok):
    """tokenizer.json dict -> list of token strings by id (None for a hole). Added tokens win."""
    vocab = tok["model"]["vocab"]
    added = tok.get("added_tokens", [])
    n = max([*vocab.values(), *(a["id"] for a in added)]) + 1
    table = [None] * n
    for s, i in vocab.items():
        table[i] = s
    for a in added:
        table[a["id"]] = a["content"]
    return table


def build_compressed_token_map(tokenizer_json_path):
    """ref: engram.py build_compressed_token_map. Returns (lookup int64 [n_ids], n_classes)."""
    with open(tokenizer_json_path, encoding="utf-8") as f:
        tok = json.load(f)
    table = id_to_token_table(tok)
    key_to_new = {}
    lookup = np.zeros(len(table), dtype=np.int64)
    for token_id, token in enumerate(table):
        text = "" if token is None else bytelevel_decode(token)
        if "\ufffd" in text:
            key = token  # a partial UTF-8 byte token: keyed by its raw form
        else:
            normalized = normalize(text)
            key = normalized if normalized else text
        new_id = key_to_new.get(key)
        if new_id is None:
            new_id = len(key_to_new)
            key_to_new[key] = new_id
        lookup[token_id] = new_id
    return lookup, len(key_to_new)


def cached_token_map(tokenizer_json_path, cache_dir="/tmp"):
    """build_compressed_token_map, cached in cache_dir keyed by the SHA-256 of tokenizer.json."""
    with open(tokenizer_json_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    path = os.path.join(cache_dir, f"cedar-ref-tokenmap-{digest[:32]}.npy")
    if os.path.exists(path):
        try:
            lookup = np.load(path)
            return lookup, int(lookup.max()) + 1
        except (OSError, ValueError):
            pass
    lookup, n = build_compressed_token_map(tokenizer_json_path)
    try:
        tmp = f"{path}.{os.getpid()}.tmp.npy"
        np.save(tmp, lookup)
        os.replace(tmp, path)
    except OSError:
        pass
    return lookup, n


# ----------------------------------------------------------------------------------------------
# multipliers, primes, offsets


def compute_hash_multipliers(layer_ids, max_ngram_size, compressed_vocab_size):
    """ref: engram.py compute_hash_multipliers -> int64 [n_layers, max_ngram_size], all odd."""
    bound = max(1, (np.iinfo(np.int64).max // compressed_vocab_size) // 2)
    rows = []
    for layer_id in layer_ids:
        rng = np.random.default_rng(10007 * layer_id)
        u = rng.integers(0, bound, size=(max_ngram_size,), dtype=np.int64)
        rows.append(u * 2 + 1)
    return np.stack(rows)


def _is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    i = 3
    while i * i <= n:
        if n % i == 0:
            return False
        i += 2
    return True


def find_next_prime(start, seen):
    c = start + 1
    while not _is_prime(c) or c in seen:
        c += 1
    return c


def engram_primes(n_layers, max_ngram_size, n_heads, engram_vocab_size):
    """ref: engram.py EngramLayout.from_args -> int64 [n_layers, max_ngram_size-1, n_heads]."""
    seen = set()
    out = []
    for _ in range(n_layers):
        per_ngram = []
        for _ in range(max_ngram_size - 1):
            cur, sizes = engram_vocab_size - 1, []
            for _ in range(n_heads):
                cur = find_next_prime(cur, seen)
                seen.add(cur)
                sizes.append(cur)
            per_ngram.append(sizes)
        out.append(per_ngram)
    return np.array(out, dtype=np.int64)


class NgramHash:
    """ref: engram.py NgramHashState: hash ids of the n-grams ending at each position."""

    def __init__(self, args, token_map, n_classes):
        if n_classes != args.engram_compressed_vocab_size:
            raise RuntimeError(
                f"engram token map has {n_classes} ids, config engram_compressed_vocab_size is "
                f"{args.engram_compressed_vocab_size}"
            )
        self.max_n = args.engram_max_ngram_size
        self.token_map = token_map
        self.pad_id = int(token_map[args.engram_pad_token_id])
        self.primes = engram_primes(
            len(args.engram_layer_ids), self.max_n, args.engram_n_heads, args.engram_vocab_size
        )
        flat = self.primes.reshape(len(args.engram_layer_ids), -1)
        self.offsets = np.concatenate(
            [np.zeros((flat.shape[0], 1), np.int64), np.cumsum(flat, axis=1)[:, :-1]], axis=1
        )
        self.multipliers = compute_hash_multipliers(args.engram_layer_ids, self.max_n, n_classes)
        for i, rows in enumerate(args.engram_num_embeddings):
            if int(flat[i].sum()) != int(rows):
                raise RuntimeError(
                    f"engram layer {args.engram_layer_ids[i]}: primes sum to {int(flat[i].sum())}, "
                    f"config engram_num_embeddings says {rows}"
                )

    def __call__(self, ids, dead=None):
        """ids int64 [T] (positions 0..T-1) -> row ids int64 [n_layers, T, (max_n-1)*n_heads].
        dead: bool [T] or None, the image-span positions (v41-extras §1.4: an n-gram never spans
        one; an image position itself hashes all-pad)."""
        ids = np.asarray(ids, dtype=np.int64)
        T = ids.shape[0]
        comp = self.token_map[ids]
        pos = np.arange(T)
        is_dead = np.zeros(T, dtype=bool) if dead is None else np.asarray(dead, dtype=bool)
        toks = []
        blocked = np.zeros(T, dtype=bool)
        for s in range(self.max_n):
            j = np.maximum(pos - s, 0)
            blocked = blocked | (pos < s) | is_dead[j]  # blocked from the first such s onward
            toks.append(np.where(blocked, self.pad_id, comp[j]))
        toks = np.stack(toks, axis=-1)  # [T, max_n]
        out = []
        for li in range(self.multipliers.shape[0]):
            prod = toks * self.multipliers[li]  # int64, cannot overflow by construction
            rolling = prod[:, 0]
            cols = []
            for n in range(1, self.max_n):
                rolling = np.bitwise_xor(rolling, prod[:, n])
                cols.append(rolling[:, None] % self.primes[li, n - 1][None, :])
            out.append(np.concatenate(cols, axis=1) + self.offsets[li][None, :])
        return np.stack(out)


# ----------------------------------------------------------------------------------------------
# the Engram module


class Engram:
    """ref: model.py Engram (and ParallelEngramEmbedding for the row gather)."""

    def __init__(self, args, ck, layer_id, layer_hash_index):
        p = f"layers.{layer_id}.engram."
        D, hc = args.dim, args.hc_mult
        self.dim, self.hc = D, hc
        self.layer_hash_index = layer_hash_index
        rows = int(args.engram_num_embeddings[layer_hash_index])
        hd = args.engram_head_dim
        self.head_dim = hd
        self.table = ck.u8(p + "embed.weight", "F8_E4M3", (rows, hd))
        self.table_scale = ck.u8(p + "embed.scale", "F8_E8M0", (rows, hd // 32))
        n_cols = (args.engram_max_ngram_size - 1) * args.engram_n_heads
        self.wkv = FP8Linear(ck, p + "wkv", D * (hc + 1), n_cols * hd)
        qw = _bf16_or_f32(ck, p + "q_weight", (hc, D))
        kw = _bf16_or_f32(ck, p + "k_weight", (hc, D))
        self.weight = qw * kw  # fp32 product (model.py: q_weight.float() * k_weight.float())
        self.eps = F32(args.norm_eps)
        self.scale = F32(D**-0.5)  # python double dim**-0.5 -> fp32 scalar
        self.clamp = F32(1e-6)

    def embed(self, row_ids):
        """ref: ParallelEngramEmbedding.forward: FP8 rows * 2^(s-127) -> bf16, [T, n_cols*hd]."""
        v = nx.e4m3_decode(self.table[row_ids])  # [T, n_cols, hd]
        s = nx.ue8m0_decode(self.table_scale[row_ids])  # [T, n_cols, hd/32]
        v = v.reshape(*v.shape[:-1], -1, 32) * s[..., None]
        return bf16(v.reshape(row_ids.shape[0], -1))

    def __call__(self, h, row_ids, image_mask=None):
        """h: bf16 [T, hc, D]; row_ids [T, n_cols] -> new h (bf16). Image-span rows get gate 0."""
        D, hc = self.dim, self.hc
        kv = self.wkv(self.embed(row_ids))  # bf16 [T, D*(hc+1)]
        key = kv[:, : hc * D].reshape(-1, hc, D)
        val = kv[:, hc * D :]
        hf = h
        rstd = nx.rsqrt(nx.mean(hf * hf) + self.eps) * nx.rsqrt(nx.mean(key * key) + self.eps)
        dot = nx.xsum((hf * self.weight[None]) * key)  # elementwise products rounded, exact sum
        dot = (dot * rstd) * self.scale
        mag = nx.sqrt(np.maximum(np.abs(dot), self.clamp))
        gate = nx.sigmoid(np.copysign(mag, dot))
        if image_mask is not None:
            gate = np.where(image_mask[:, None], F32(0), gate).astype(F32)
        return bf16(hf + gate[..., None] * val[:, None, :])


def _bf16_or_f32(ck, name, shape):
    st = ck.where.get(name)
    if st is not None and st.dtype(name) == "F32":
        return ck.f32(name, shape)
    return ck.bf16(name, shape)
