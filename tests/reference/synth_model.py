"""Test fixture: a small random checkpoint in the release layout, written by numpy alone.

Used by the reference's own tests (reader, causality, sharding) independently of
`cedar make-model`. Tensor names, dtypes and scale layouts follow spec v41-architecture.md §13;
the shape knobs are the `tiny` preset of docs/NUMERICS.md, optionally shrunk further.
"""

import json
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "reference"))
sys.path.insert(0, HERE)

import numerics as nx  # noqa: E402
import v41_tokenizer  # noqa: E402

TINY = {
    "vocab_size": 129280,
    "hidden_size": 128,
    "moe_intermediate_size": 64,
    "num_hidden_layers": 7,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 128,
    "qk_rope_head_dim": 64,
    "q_lora_rank": 64,
    "o_lora_rank": 64,
    "o_groups": 2,
    "hidden_act": "silu",
    "swiglu_limit": 10.0,
    "rms_norm_eps": 1e-20,
    "tie_word_embeddings": False,
    "max_position_embeddings": 1048576,
    "rope_theta": 10000,
    "rope_scaling": {
        "rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
        "original_max_position_embeddings": 65536,
    },
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "scoring_func": "sqrtsoftplus",
    "topk_method": "noaux_tc",
    "norm_topk_prob": True,
    "routed_scaling_factor": 1.5,
    "sliding_window": 128,
    "compress_ratios": [0, 0, 2, 2, 1, 1, 1],
    "compress_rope_theta": 160000,
    "kv_source_layer_ids": [2, 4],
    "index_source_layer_ids": [2, 4, 5],
    "index_n_heads": 4,
    "index_head_dim": 128,
    "index_topk": 16,
    "candidate_source_layer_id": 4,
    "candidate_topk_blocks": 4,
    "candidate_block_size": 8,
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "hc_eps": 1e-06,
    "engram_layer_ids": [1, 2],
    "engram_max_ngram_size": 4,
    "engram_vocab_size": 1000,
    "engram_n_heads": 2,
    "engram_head_dim": 32,
    "engram_pad_token_id": 2,
    "engram_compressed_vocab_size": 99092,
    "num_nextn_predict_layers": 0,
}


def _write_safetensors(path, tensors):
    """tensors: name -> (dtype string, numpy array of the raw storage)."""
    header, blobs, off = {}, [], 0
    for name, (dt, arr) in tensors.items():
        b = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def _bf16_bits(x):
    return (nx.bf16(x).view(np.uint32) >> 16).astype(np.uint16)


def _ue8m0(s):
    return (np.log2(s).astype(np.int64) + 127).astype(np.uint8)


def _fp8(rng, n, k, std):
    w = rng.standard_normal((n, k)).astype(np.float32) * np.float32(std)
    nb, kb = -(-n // 32), k // 32
    wp = np.zeros((nb * 32, k), np.float32)
    wp[:n] = w
    blocks = wp.reshape(nb, 32, kb, 32)
    amax = np.maximum(np.abs(blocks).max(axis=(1, 3)), 1e-12)
    s = np.exp2(np.ceil(np.log2(amax / 448.0))).astype(np.float32)
    codes = nx.e4m3_encode(blocks / s[:, None, :, None]).reshape(nb * 32, k)[:n]
    return codes, _ue8m0(s)


def _fp4(rng, n, k, std):
    w = rng.standard_normal((n, k // 32, 32)).astype(np.float32) * np.float32(std)
    amax = np.maximum(np.abs(w).max(-1), 1e-12)
    s = np.exp2(np.ceil(np.log2(amax / 6.0))).astype(np.float32)
    codes = nx.e2m1_encode(np.clip(w / s[..., None], -6, 6)).reshape(n, k)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed, _ue8m0(s)


def make_model(out_dir, seed=1, cfg_overrides=None, shards=1):
    """Write config.json, model.safetensors (or shards + index) and tokenizer.json."""
    cfg = dict(TINY)
    cfg.update(cfg_overrides or {})
    rng = np.random.default_rng(seed)
    D, V, L = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    H, hd, ql = cfg["num_attention_heads"], cfg["head_dim"], cfg["q_lora_rank"]
    G, R = cfg["o_groups"], cfg["o_lora_rank"]
    E, I, hc = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["hc_mult"]
    IH, ihd = cfg["index_n_heads"], cfg["index_head_dim"]
    t = {}

    def bf(name, shape, std, mean=0.0):
        t[name] = ("BF16", _bf16_bits(mean + std * rng.standard_normal(shape).astype(np.float32)))

    def f32(name, shape, std, mean=0.0):
        t[name] = ("F32", (mean + std * rng.standard_normal(shape)).astype(np.float32))

    def fp8(name, n, k):
        w, s = _fp8(rng, n, k, 1.0 / np.sqrt(k))
        t[name + ".weight"] = ("F8_E4M3", w)
        t[name + ".scale"] = ("F8_E8M0", s)

    def fp4(name, n, k):
        w, s = _fp4(rng, n, k, 1.0 / np.sqrt(k))
        t[name + ".weight"] = ("I8", w)
        t[name + ".scale"] = ("F8_E8M0", s)

    bf("embed.weight", (V, D), 1.0)
    bf("head.weight", (V, D), 1.0 / np.sqrt(D))
    bf("norm.weight", (D,), 0.1, 1.0)
    primes = None
    if cfg["engram_layer_ids"]:
        import engram

        primes = engram.engram_primes(
            len(cfg["engram_layer_ids"]), cfg["engram_max_ngram_size"], cfg["engram_n_heads"],
            cfg["engram_vocab_size"],
        )
        cfg["engram_num_embeddings"] = [int(p.sum()) for p in primes]
    mix = (2 + hc) * hc
    for l in range(L):
        p = f"layers.{l}."
        r = cfg["compress_ratios"][l]
        bf(p + "attn_norm.weight", (D,), 0.1, 1.0)
        bf(p + "ffn_norm.weight", (D,), 0.1, 1.0)
        f32(p + "attn.attn_sink", (H,), 1.0)
        bf(p + "attn.q_norm.weight", (ql,), 0.1, 1.0)
        bf(p + "attn.kv_norm.weight", (hd,), 0.1, 1.0)
        fp8(p + "attn.wq_a", ql, D)
        fp8(p + "attn.wq_b", H * hd, ql)
        fp8(p + "attn.wkv", hd, D)
        fp8(p + "attn.wo_a", G * R, H * hd // G)
        fp8(p + "attn.wo_b", D, G * R)
        for site in ("attn", "ffn"):
            f32(p + f"hc_{site}_fn", (mix, hc * D), 1.0 / np.sqrt(hc * D))
            f32(p + f"hc_{site}_base", (mix,), 0.5)
            f32(p + f"hc_{site}_scale", (3,), 0.3, 1.0)
        bf(p + "ffn.gate.weight", (E, D), 1.0 / np.sqrt(D))
        f32(p + "ffn.gate.bias", (E,), 0.1)
        for e in range(E):
            fp4(p + f"ffn.experts.{e}.w1", I, D)
            fp4(p + f"ffn.experts.{e}.w3", I, D)
            fp4(p + f"ffn.experts.{e}.w2", D, I)
        fp8(p + "ffn.shared_experts.w1", I, D)
        fp8(p + "ffn.shared_experts.w3", I, D)
        fp8(p + "ffn.shared_experts.w2", D, I)
        if l in cfg["kv_source_layer_ids"]:
            bf(p + "attn.compressor.wkv.weight", (hd, D), 1.0 / np.sqrt(D))
            if r == 2:
                bf(p + "attn.compressor.wgate.weight", (hd, D), 1.0 / np.sqrt(D))
            bf(p + "attn.compressor.norm.weight", (hd,), 0.1, 1.0)
            bf(p + "attn.indexer.wk.weight", (ihd, hd), 1.0 / np.sqrt(hd))
            bf(p + "attn.indexer.k_norm.weight", (ihd,), 0.1, 1.0)
        if l in cfg["index_source_layer_ids"]:
            fp8(p + "attn.indexer.wq_b", IH * ihd, ql)
            bf(p + "attn.indexer.weights_proj.weight", (IH, D), 1.0 / np.sqrt(D))
        if l in cfg["engram_layer_ids"]:
            i = cfg["engram_layer_ids"].index(l)
            rows, ehd = cfg["engram_num_embeddings"][i], cfg["engram_head_dim"]
            n_cols = (cfg["engram_max_ngram_size"] - 1) * cfg["engram_n_heads"]
            tab = rng.standard_normal((rows, ehd // 32, 32)).astype(np.float32)
            s = np.exp2(np.ceil(np.log2(np.abs(tab).max(-1) / 448.0))).astype(np.float32)
            t[p + "engram.embed.weight"] = (
                "F8_E4M3", nx.e4m3_encode(tab / s[..., None]).reshape(rows, ehd))
            t[p + "engram.embed.scale"] = ("F8_E8M0", _ue8m0(s))
            fp8(p + "engram.wkv", D * (hc + 1), n_cols * ehd)
            bf(p + "engram.q_weight", (hc, D), 0.5, 1.0)
            bf(p + "engram.k_weight", (hc, D), 0.5, 1.0)

    os.makedirs(out_dir, exist_ok=True)
    full = {
        "architectures": ["DeepseekV41ForCausalLM"],
        "model_type": "deepseek_v41",
        "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "image_token_id": 129264,
        "quantization_config": {
            "quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [32, 32],
            "scale_fmt": "ue8m0", "expert_dtype": "fp4",
        },
        "text_config": dict(cfg, model_type="deepseek_v41_text"),
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(full, f, indent=1)
    names = list(t)
    if shards == 1:
        _write_safetensors(os.path.join(out_dir, "model.safetensors"), t)
    else:
        wm = {}
        per = -(-len(names) // shards)
        for si in range(shards):
            fn = f"model-{si + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: t[n] for n in names[si * per : (si + 1) * per]}
            _write_safetensors(os.path.join(out_dir, fn), part)
            wm.update({n: fn for n in part})
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": wm}, f)
    tok_cache = "/tmp/cedar-ref-v41-tokenizer.json"
    if not os.path.exists(tok_cache):
        v41_tokenizer.build_v41_tokenizer(tok_cache + f".{os.getpid()}")
        os.replace(tok_cache + f".{os.getpid()}", tok_cache)
    shutil.copyfile(tok_cache, os.path.join(out_dir, "tokenizer.json"))
    return out_dir


if __name__ == "__main__":
    make_model(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
