"""End-to-end tests of the reference on a small random checkpoint in the release layout (written
by synth_model.py): per-query semantics (prefix invariance across the window, ratio-2 groups, the
Top-K and candidate limits), sharded = single file, the CLI contract and its error handling."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "..", "tools", "reference")
sys.path.insert(0, REF)
sys.path.insert(0, HERE)

import synth_model  # noqa: E402
from checkpoint import Checkpoint, CheckpointError  # noqa: E402
from logits import load_model  # noqa: E402

LOGITS = os.path.join(REF, "logits.py")
PY = sys.executable


def run_cli(*args):
    return subprocess.run([PY, LOGITS, *args], capture_output=True, text=True)


class TestForward(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cedar-ref-test-")
        # index_topk 4 / 2 candidate blocks of 4 rows: the limits bite at short lengths
        over = {"index_topk": 4, "candidate_topk_blocks": 2, "candidate_block_size": 4}
        cls.dir = synth_model.make_model(os.path.join(cls.tmp, "m"), seed=3, cfg_overrides=over)
        cls.model = load_model(cls.dir)
        rng = np.random.default_rng(9)
        cls.ids = rng.integers(0, 129280, 150)
        cls.full = cls.model.forward(cls.ids)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_shape_and_values(self):
        self.assertEqual(self.full.shape, (150, 129280))
        self.assertEqual(self.full.dtype, np.float32)
        self.assertTrue(np.isfinite(self.full).all())
        self.assertGreater(float(self.full.std()), 0.1)

    def test_prefix_invariance(self):
        # every position sees only its own visible rows: a shorter prompt gives the same rows
        for T in (1, 2, 3, 129):
            part = self.model.forward(self.ids[:T])
            self.assertTrue(np.array_equal(part, self.full[:T]), T)

    def test_shared_index_key_slot_readings_differ(self):
        """The official decode step publishes a KV source's index keys to the one shared slot only
        when its compression group completes; on the other steps a ratio-2 index source scores
        against whatever the slot still holds: the previous step's last publisher, here the
        ratio-1 source 4. cedar (and this reference) scores every source against its own keys,
        as the official prefill does. At an odd length the two readings select different rows
        for the last query and give different logits (docs/NUMERICS.md, "The shared index-key
        slot")."""
        import model as ref

        T = 149  # the last query at position 148: layer 2's group (148, 149) is incomplete
        states = []

        class Recorded(ref.SharedState):
            def __init__(self):
                super().__init__()
                states.append(self)

        saved = ref.SharedState
        ref.SharedState = Recorded
        try:
            self.model.forward(self.ids[: T - 1])  # the previous step: layer 4's keys published
            slot = states[-1].index_k[4]
            ix = self.model.layers[2].attn.indexer
            self.assertEqual(ix.ratio, 2)

            def slot_scores(x, qr, index_k, cos, sin):
                sc = ref.Indexer.scores(ix, x, qr, index_k, cos, sin)
                # the official slice: end_pos // ratio rows of the slot's cache
                sc[-1] = ref.Indexer.scores(ix, x[-1:], qr[-1:], slot[: index_k.shape[0]],
                                            cos[-1:], sin[-1:])[0]
                return sc

            ix.scores = slot_scores
            try:
                quirk = self.model.forward(self.ids[:T])
                quirk_topk = states[-1].topk[2][-1]
            finally:
                del ix.scores
            own = self.model.forward(self.ids[:T])
            own_topk = states[-1].topk[2][-1]
        finally:
            ref.SharedState = saved
        self.assertTrue(np.array_equal(own, self.full[:T]))  # the patch is gone
        self.assertFalse(np.array_equal(np.sort(quirk_topk), np.sort(own_topk)))
        self.assertTrue(np.array_equal(quirk[:-1], own[:-1]))  # only the last query reads the slot
        self.assertFalse(np.array_equal(quirk[-1], own[-1]))
        print(f"\n  shared-slot reading, last query: rows {sorted(quirk_topk.tolist())} vs own "
              f"keys {sorted(own_topk.tolist())}; logits rel L2 "
              f"{np.linalg.norm(quirk[-1] - own[-1]) / np.linalg.norm(own[-1]):.3g}, top-1 "
              f"{int(np.argmax(quirk[-1]))} vs {int(np.argmax(own[-1]))}", file=sys.stderr)

    def test_future_token_does_not_leak(self):
        ids = self.ids.copy()
        ids[140] = (ids[140] + 1) % 129280
        out = self.model.forward(ids)
        self.assertTrue(np.array_equal(out[:140], self.full[:140]))
        self.assertFalse(np.array_equal(out[140], self.full[140]))

    def test_sharded_equals_single(self):
        over = {"index_topk": 4, "candidate_topk_blocks": 2, "candidate_block_size": 4}
        d = synth_model.make_model(os.path.join(self.tmp, "sharded"), seed=3, cfg_overrides=over,
                                   shards=3)
        self.assertTrue(os.path.exists(os.path.join(d, "model.safetensors.index.json")))
        out = load_model(d).forward(self.ids[:20])
        self.assertTrue(np.array_equal(out, self.full[:20]))

    def test_cli(self):
        out = os.path.join(self.tmp, "cli.npy")
        r = run_cli("--model", self.dir, "--ids", ",".join(map(str, self.ids[:5])), "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(np.array_equal(np.load(out), self.full[:5]))
        f = os.path.join(self.tmp, "ids.txt")
        with open(f, "w") as fh:
            fh.write(" ".join(map(str, self.ids[:3])) + "\n,")
        r = run_cli("--model", self.dir, "--ids-file", f, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(np.array_equal(np.load(out), self.full[:3]))

    def test_cli_errors(self):
        out = os.path.join(self.tmp, "bad.npy")
        cases = [
            (("--model", "/nonexistent/dir", "--ids", "1,2"), "no such directory"),
            (("--model", self.dir, "--ids", "1,x"), "bad token id"),
            (("--model", self.dir, "--ids", "1,-3"), "bad token id"),
            (("--model", self.dir, "--ids", ""), "no token ids"),
            (("--model", self.dir, "--ids", "1,129280"), "outside the vocabulary"),
            (("--model", self.dir, "--ids-file", "/nonexistent/ids"), "--ids-file"),
            (("--model", self.dir), "required"),
        ]
        for args, msg in cases:
            r = run_cli(*args, "--out", out)
            self.assertEqual(r.returncode, 1, (args, r.stderr))
            self.assertIn(msg, r.stderr, args)
            self.assertNotIn("Traceback", r.stderr)


class TestCheckpointErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cedar-ref-ckpt-")
        over = {"num_hidden_layers": 2, "compress_ratios": [0, 0], "kv_source_layer_ids": [],
                "index_source_layer_ids": [], "candidate_source_layer_id": -1,
                "engram_layer_ids": [1]}
        cls.over = over
        cls.good = synth_model.make_model(os.path.join(cls.tmp, "good"), 1, over)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def copy(self, name):
        d = os.path.join(self.tmp, name)
        shutil.copytree(self.good, d)
        return d

    def rewrite_header(self, d, edit):
        path = os.path.join(d, "model.safetensors")
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            head = json.loads(f.read(n))
            data = f.read()
        edit(head)
        h = json.dumps(head).encode()
        h += b" " * (-len(h) % 8)
        with open(path, "wb") as f:
            f.write(len(h).to_bytes(8, "little") + h + data)

    def expect(self, d, *words):
        with self.assertRaises(CheckpointError) as cm:
            load_model(d)
        for w in words:
            self.assertIn(w, str(cm.exception))
        r = run_cli("--model", d, "--ids", "1", "--out", os.path.join(self.tmp, "x.npy"))
        self.assertEqual(r.returncode, 1)
        self.assertNotIn("Traceback", r.stderr)

    def test_good_loads(self):
        self.assertEqual(load_model(self.good).forward([0, 1]).shape, (2, 129280))

    def test_missing_tensor(self):
        d = self.copy("missing")
        self.rewrite_header(d, lambda h: h.pop("layers.1.attn.wkv.scale"))
        self.expect(d, "layers.1.attn.wkv.scale", "missing")

    def test_wrong_shape(self):
        d = self.copy("shape")

        def edit(h):
            h["layers.0.attn_norm.weight"]["shape"] = [64, 2]

        self.rewrite_header(d, edit)
        self.expect(d, "layers.0.attn_norm.weight", "shape")

    def test_wrong_dtype(self):
        d = self.copy("dtype")

        def edit(h):
            h["layers.0.attn.attn_sink"]["dtype"] = "BF16"
            h["layers.0.attn.attn_sink"]["shape"] = [8]

        self.rewrite_header(d, edit)
        self.expect(d, "layers.0.attn.attn_sink", "dtype")

    def test_128_block_scales(self):
        d = self.copy("scale128")

        def edit(h):
            h["layers.0.attn.wq_a.scale"]["shape"] = [1, 1]

        self.rewrite_header(d, edit)
        self.expect(d, "layers.0.attn.wq_a.scale", "shape")

    def test_truncated(self):
        d = self.copy("trunc")
        path = os.path.join(d, "model.safetensors")
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 1000)
        self.expect(d)

    def test_bad_json(self):
        d = self.copy("json")
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write("{not json")
        self.expect(d, "config.json")
        d2 = self.copy("json2")
        path = os.path.join(d2, "model.safetensors")
        with open(path, "r+b") as f:
            f.seek(8)
            f.write(b"!!")
        self.expect(d2, "header")

    def test_missing_config_key(self):
        d = self.copy("key")
        p = os.path.join(d, "config.json")
        with open(p) as f:
            cfg = json.load(f)
        del cfg["text_config"]["head_dim"]
        with open(p, "w") as f:
            json.dump(cfg, f)
        self.expect(d, "head_dim")

    def test_reader_dtypes(self):
        ck = Checkpoint(self.good)
        self.assertEqual(ck.bf16("norm.weight").dtype, np.float32)
        w, s = ck.fp8("layers.0.attn.wq_a", (64, 128))
        self.assertEqual((w.dtype, s.shape), (np.uint8, (2, 4)))
        w, s = ck.fp4("layers.0.ffn.experts.0.w1", (64, 128))
        self.assertEqual((w.shape, s.shape), ((64, 64), (64, 4)))


if __name__ == "__main__":
    unittest.main()
