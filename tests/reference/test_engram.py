"""Engram pieces of the reference: token map (99,092 ids), multipliers, primes, hash ids."""

import hashlib
import os
import sys
import unittest
from types import SimpleNamespace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "reference"))
sys.path.insert(0, HERE)

import engram  # noqa: E402
import v41_tokenizer  # noqa: E402

RELEASED = SimpleNamespace(
    engram_layer_ids=(1, 14),
    engram_num_embeddings=(384006168, 384016682),
    engram_max_ngram_size=4,
    engram_vocab_size=16000000,
    engram_n_heads=8,
    engram_pad_token_id=2,
    engram_compressed_vocab_size=99092,
)


class TestNormalizer(unittest.TestCase):
    def test_rules(self):
        n = engram.normalize
        self.assertEqual(n(" The"), "the")
        self.assertEqual(n("THE"), "the")
        self.assertEqual(n(" "), " ")  # a lone space survives Strip
        self.assertEqual(n("\n\n"), " ")  # collapses to one space, then kept
        self.assertEqual(n(" \t x \r\n"), "x")
        self.assertEqual(n("Café"), "cafe")  # NFD + mark removal
        self.assertEqual(n("ﬁ"), "fi")  # NFKC
        self.assertEqual(n("\u0915\u093f"), "\u0915")  # a spacing mark (Mc) is removed too
        self.assertEqual(n("ΟΔΟΣ"), "οδοσ")  # per-char lowercase: no final sigma
        self.assertEqual(n("\x1cab"), "\x1cab")  # not White_Space: Rust's trim keeps it
        self.assertEqual(n("ab\u3000"), "ab")  # NFKC -> space -> stripped
        self.assertEqual(n("a\u2028"), "a")  # White_Space, not collapsed, stripped
        self.assertEqual(n("\ue000"), " ")  # the sentinel replace applies to literal U+E000

    def test_bytelevel_decode(self):
        self.assertEqual(engram.bytelevel_decode("\u0120the"), " the")  # Ġ is the space byte
        self.assertEqual(engram.bytelevel_decode("<｜User｜>"), "<｜User｜>")  # added token
        self.assertIn("\ufffd", engram.bytelevel_decode("\u00e4"))  # lone byte 0xE4: partial


@unittest.skipUnless(os.path.exists(v41_tokenizer.V3_TOKENIZER), "pinned npm tokenizer missing")
class TestTokenMap(unittest.TestCase):
    def test_v41_count_and_hash(self):
        path = "/tmp/cedar-ref-test-v41-tokenizer.json"
        v41_tokenizer.build_v41_tokenizer(path)
        lookup, n = engram.build_compressed_token_map(path)
        self.assertEqual(len(lookup), 129280)
        self.assertEqual(n, 99092)
        self.assertEqual(int(lookup[2]), 2)
        # SHA-256 of the little-endian int32 map as recorded by third parties (spec extras §1.3)
        digest = hashlib.sha256(lookup.astype("<i4").tobytes()).hexdigest()
        self.assertEqual(digest, "c60a86322ec17b4142bfef3c57a8d81fb428550cdf487f88a4320cb59fe46481")


class TestLayout(unittest.TestCase):
    def test_released_multipliers(self):
        m = engram.compute_hash_multipliers((1, 14), 4, 99092)
        np.testing.assert_array_equal(
            m,
            [[76632096046245, 4839876093313, 35959672319349, 73987337458391],
             [67716810739261, 51510806800915, 30921347202721, 82619226485591]],
        )

    def test_released_primes(self):
        p = engram.engram_primes(2, 4, 8, 16000000)
        np.testing.assert_array_equal(
            p[0, 0],
            [16000057, 16000079, 16000081, 16000097, 16000121, 16000129, 16000133, 16000183],
        )
        np.testing.assert_array_equal(
            p[1, 2],
            [16000781, 16000799, 16000813, 16000819, 16000841, 16000877, 16000879, 16000889],
        )
        self.assertEqual(int(p[0].sum()), 384006168)
        self.assertEqual(int(p[1].sum()), 384016682)

    def test_hash_ids_against_python_ints(self):
        token_map = np.arange(129280, dtype=np.int64) % 99092
        h = engram.NgramHash(RELEASED, token_map, 99092)
        np.testing.assert_array_equal(h.offsets[0][:3], [0, 16000057, 32000136])
        np.testing.assert_array_equal(h.offsets[1][8:10], [128004290, 144004957])
        ids = np.array([0, 5, 99100, 7, 128000])
        got = h(ids)
        self.assertEqual(got.shape, (2, 5, 24))
        mult = engram.compute_hash_multipliers((1, 14), 4, 99092)
        primes = engram.engram_primes(2, 4, 8, 16000000)
        for li in range(2):
            for p in range(5):
                toks = []
                for s in range(4):
                    toks.append(int(token_map[ids[p - s]]) if p >= s else 2)
                r = toks[0] * int(mult[li, 0])
                col, off = 0, 0
                for n in range(1, 4):
                    r ^= toks[n] * int(mult[li, n])
                    for head in range(8):
                        pr = int(primes[li, n - 1, head])
                        self.assertEqual(int(got[li, p, col]), r % pr + off)
                        off += pr
                        col += 1

    def test_wrong_vocab_size_refused(self):
        with self.assertRaises(RuntimeError):
            engram.NgramHash(RELEASED, np.zeros(10, np.int64), 99091)


if __name__ == "__main__":
    unittest.main()
