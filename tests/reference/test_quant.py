"""Bit-exact tests of the reference quantizers and roundings (docs/NUMERICS.md §Q, bf16)."""

import os
import sys
import unittest
from decimal import Decimal, getcontext

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "reference"))

import numerics as nx  # noqa: E402

F32 = np.float32


def bits(x):
    return np.asarray(x, dtype=F32).view(np.uint32)


def from_bits(u):
    return np.asarray(u, dtype=np.uint32).view(F32)


class TestBF16(unittest.TestCase):
    def test_round_to_nearest_even(self):
        # 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to the even mantissa (1.0)
        self.assertEqual(bits(nx.bf16(from_bits(0x3F808000))), 0x3F800000)
        # 1.0078125 + 2^-8 is halfway with an odd lower neighbour: rounds up
        self.assertEqual(bits(nx.bf16(from_bits(0x3F818000))), 0x3F820000)
        # just above halfway rounds up, just below rounds down
        self.assertEqual(bits(nx.bf16(from_bits(0x3F808001))), 0x3F810000)
        self.assertEqual(bits(nx.bf16(from_bits(0x3F807FFF))), 0x3F800000)

    def test_sign_zero_inf(self):
        self.assertEqual(bits(nx.bf16(F32(-0.0))), 0x80000000)
        self.assertEqual(bits(nx.bf16(F32(np.inf))), 0x7F800000)
        # the largest fp32 rounds up to +inf in bf16
        self.assertEqual(bits(nx.bf16(from_bits(0x7F7FFFFF))), 0x7F800000)
        self.assertTrue(np.isnan(nx.bf16(F32(np.nan))))

    def test_against_float64_reference(self):
        rng = np.random.default_rng(1)
        x = (rng.standard_normal(100000) * 10.0 ** rng.uniform(-20, 20, 100000)).astype(F32)
        got = nx.bf16(x).astype(np.float64)
        # independent: round to 8 significant bits in float64 with np.rint (half to even)
        m, e = np.frexp(x.astype(np.float64))
        want = np.ldexp(np.rint(m * 256.0), e - 8)
        np.testing.assert_array_equal(got, want)


class TestE4M3(unittest.TestCase):
    def test_decode_table(self):
        self.assertEqual(nx.E4M3_TABLE[0x7E], 448.0)
        self.assertEqual(nx.E4M3_TABLE[0x01], 2.0**-9)
        self.assertEqual(nx.E4M3_TABLE[0x08], 2.0**-6)
        self.assertEqual(nx.E4M3_TABLE[0x38], 1.0)
        self.assertTrue(np.isnan(nx.E4M3_TABLE[0x7F]) and np.isnan(nx.E4M3_TABLE[0xFF]))
        self.assertEqual(nx.E4M3_TABLE[0xBE], -1.75)

    def test_roundtrip_every_code(self):
        codes = np.array([c for c in range(256) if c not in (0x7F, 0xFF)], dtype=np.uint8)
        np.testing.assert_array_equal(nx.e4m3_encode(nx.E4M3_TABLE[codes]), codes)

    def test_ties_go_to_even_code(self):
        pos = nx.E4M3_TABLE[:127].astype(np.float64)
        mids = ((pos[:-1] + pos[1:]) / 2).astype(F32)  # exact in fp32
        got = nx.e4m3_encode(mids)
        want = np.where(np.arange(126) % 2 == 0, np.arange(126), np.arange(1, 127))
        np.testing.assert_array_equal(got, want)
        # examples: 2^-10 -> 0, 3*2^-10 -> code 2, 1.0625 -> 1.0, 1.1875 -> 1.25
        self.assertEqual(nx.e4m3_round(F32(2.0**-10)), 0.0)
        self.assertEqual(nx.e4m3_round(F32(3 * 2.0**-10)), 2 * 2.0**-9)
        self.assertEqual(nx.e4m3_round(F32(1.0625)), 1.0)
        self.assertEqual(nx.e4m3_round(F32(1.1875)), 1.25)

    def test_saturation_and_sign(self):
        self.assertEqual(nx.e4m3_encode(F32(1e9)), 0x7E)
        self.assertEqual(nx.e4m3_encode(F32(-464.0)), 0xFE)
        self.assertEqual(nx.e4m3_encode(F32(-0.0)), 0x80)
        self.assertEqual(bits(nx.e4m3_round(F32(-1e-6))), 0x80000000)  # -0 keeps its sign
        self.assertEqual(nx.e4m3_round(F32(np.inf)), 448.0)

    def test_encoder_twins_agree(self):
        rng = np.random.default_rng(2)
        x = (rng.standard_normal(200000) * 10.0 ** rng.uniform(-5, 3, 200000)).astype(F32)
        a = nx.E4M3_TABLE[nx.e4m3_encode(x)]
        b = nx.e4m3_round(x)
        np.testing.assert_array_equal(bits(a), bits(b))


class TestE2M1(unittest.TestCase):
    def test_grid_and_ties(self):
        cases = {
            0.25: 0.0, 0.75: 1.0, 1.25: 1.0, 1.75: 2.0, 2.5: 2.0, 3.5: 4.0, 5.0: 4.0,
            0.26: 0.5, 2.6: 3.0, 5.01: 6.0, 6.0: 6.0, 0.0: 0.0, 1.5: 1.5,
        }
        for x, want in cases.items():
            self.assertEqual(float(nx.e2m1_round(F32(x))), want, x)
            self.assertEqual(float(nx.e2m1_round(F32(-x))), -want, -x)
        self.assertEqual(bits(nx.e2m1_round(F32(-0.1))), 0x80000000)  # -0.1 -> -0
        self.assertEqual(int(nx.e2m1_encode(F32(-0.1))), 0x8)

    def test_pack_unpack(self):
        packed = np.array([[0x21, 0xF7]], dtype=np.uint8)
        np.testing.assert_array_equal(nx.unpack_fp4(packed), [[0.5, 1.0, 6.0, -6.0]])


class TestScales(unittest.TestCase):
    def test_ue8m0(self):
        np.testing.assert_array_equal(nx.ue8m0_decode(np.array([127, 128, 0, 1])),
                                      [1.0, 2.0, 2.0**-127, 2.0**-126])

    def test_fast_round_scale(self):
        inv = nx.FP8_MAX_INV
        rng = np.random.default_rng(3)
        amax = (10.0 ** rng.uniform(-4, 4, 10000)).astype(F32)
        got = nx.fast_round_scale(amax, inv)
        t = (amax * inv).astype(np.float64)
        want = np.exp2(np.ceil(np.log2(t)))  # smallest power of two >= the fp32 product
        np.testing.assert_array_equal(got, want)
        # an exact power of two stays; one ulp above goes up a binade
        self.assertEqual(nx.fast_round_scale(F32(2.0), F32(0.5)), 1.0)
        self.assertEqual(nx.fast_round_scale(np.nextafter(F32(2.0), F32(3)), F32(0.5)), 2.0)


class TestActQuant(unittest.TestCase):
    def test_fp8_block(self):
        x = np.zeros(64, F32)
        x[0], x[1], x[2] = 448.0, 1.0, -0.3
        x[32:] = 0.0
        q, s = nx.act_quant(nx.bf16(x), 32)
        self.assertEqual(s[0], 1.0)  # amax 448 -> t = f32(448 * f32(1/448)) -> 2^0
        # all-zero block: amax floored at 1e-4, scale 2^ceil(log2(1e-4/448)) = 2^-22
        self.assertEqual(s[1], 2.0**-22)
        self.assertEqual(q[0], 448.0)
        self.assertEqual(q[2], nx.e4m3_round(nx.bf16(F32(-0.3))))
        y = nx.act_quant_inplace(nx.bf16(x), 32)
        np.testing.assert_array_equal(y[:3], [448.0, 1.0, float(nx.e4m3_round(nx.bf16(F32(-0.3))))])

    def test_fp8_dequant_error_bound(self):
        rng = np.random.default_rng(4)
        x = nx.bf16(rng.standard_normal((50, 128)).astype(F32) * 3)
        y = nx.act_quant_inplace(x, 32)
        xg = x.reshape(50, 4, 32)
        amax = np.abs(xg).max(-1, keepdims=True)
        err = np.abs(y.reshape(50, 4, 32) - xg)
        self.assertTrue(np.all(err <= amax / 448 * 2 * 16))  # half an E4M3 ulp of the block max
        self.assertFalse(np.array_equal(y, x))

    def test_fp4_e4m3_scale(self):
        x = np.zeros(32, F32)
        x[:4] = [6.0, 3.1, -0.7, 0.24]
        y = nx.fp4_act_quant(nx.bf16(x), 16, "e4m3")
        # amax 6 -> s = E4M3(6/6) = 1; values go to the E2M1 grid
        np.testing.assert_array_equal(y[:4], [6.0, 3.0, -0.5, 0.0])
        np.testing.assert_array_equal(y[16:], 0.0)  # all-zero block (scale floored at 2^-9)
        x2 = np.zeros(16, F32)
        x2[0] = 1.0  # s = E4M3(f32(1/6)) = 0.171875 (nearest E4M3), v = 1/s = 5.8181... -> 6
        y2 = nx.fp4_act_quant(x2, 16, "e4m3")
        self.assertEqual(y2[0], nx.bf16(F32(6.0) * F32(0.171875)))

    def test_fp4_ue8m0_scale(self):
        x = np.zeros(32, F32)
        x[:3] = [6.0, 1.3, -5.1]
        y = nx.fp4_act_quant(nx.bf16(x), 32, "ue8m0")
        np.testing.assert_array_equal(y[:3], [6.0, 1.5, -6.0])
        x[0] = 7.0  # amax 7 -> s = 2 -> 1.3/2 = 0.65 -> 0.5 -> 1.0 ; -5.1/2 = -2.55 -> -3 -> -6
        y = nx.fp4_act_quant(nx.bf16(x), 32, "ue8m0")
        np.testing.assert_array_equal(y[:3], [8.0, 1.0, -6.0])


class TestReductions(unittest.TestCase):
    def test_xsum_exact_and_positive_zero(self):
        t = np.array([1e8, 1.0, -1e8, 0.5], F32)  # an fp32 running sum would lose the 1.0
        self.assertEqual(nx.xsum(t), 1.5)
        z = nx.xsum(np.array([-0.0, -0.0], F32))
        self.assertEqual(bits(z), 0)

    def test_dot_exact_keeps_each_product_exact(self):
        # canonical rule 1: the terms of a matrix product are the exact products
        a = np.array([[1 + 2.0**-23, 1 + 2.0**-23]], F32)
        b = np.array([[1 + 2.0**-23, -1.0]], F32)
        # (1+e)^2 - (1+e) = e + e^2 exactly; products rounded to fp32 first would give e
        self.assertEqual(nx.dot_exact(a, b)[0, 0], F32(2.0**-23 + 2.0**-46))

    def test_transcendentals_correctly_rounded(self):
        x = np.array([0.0, 1.0, -3.5, 25.0], F32)
        np.testing.assert_array_equal(nx.softplus(x)[3], F32(25.0))
        self.assertEqual(nx.exp(F32(0.0)), 1.0)
        self.assertEqual(nx.sigmoid(F32(0.0)), 0.5)
        self.assertEqual(nx.silu(F32(1.0)), F32(1.0 / (1.0 + np.exp(-1.0))))
        self.assertEqual(nx.rsqrt(F32(4.0)), 0.5)

    def test_sigmoid_midpoints_resolved(self):
        # canonical rule 4: glibc's double 1/(1+exp(-x)) lands exactly on an fp32 rounding
        # midpoint at these arguments and rounds up; the correctly rounded value (50-digit
        # decimal) is the lower neighbour. numpy's own SIMD exp (AVX-512 machines) may land a
        # double ulp away instead, so the midpoint is this machine's fact or not; the result must
        # be the correctly rounded one either way.
        getcontext().prec = 50
        for b in (0x372E0000, 0x37360000, 0x374E0000):
            x = np.array([b], np.uint32).view(F32)
            exact = Decimal(1) / (Decimal(1) + Decimal(-float(x[0])).exp())
            got = nx.sigmoid(x)[0]
            for nb in (np.nextafter(got, F32(0)), np.nextafter(got, F32(1))):
                self.assertLess(abs(Decimal(float(got)) - exact), abs(Decimal(float(nb)) - exact))
            d = 1.0 / (1.0 + np.exp(-float(x[0])))
            r = F32(d)
            if abs(Decimal(d) - Decimal(float(r))) == abs(
                Decimal(d) - Decimal(float(np.nextafter(r, F32(0))))
            ):
                self.assertEqual(got, np.nextafter(r, F32(0)))  # the midpoint was resolved down

if __name__ == "__main__":
    unittest.main()
