// Engram layout: numpy RNG re-implementation, bucket primes/offsets and hash multipliers against
// the spec (§8.2-§8.3) and numpy 1.24 (values below printed by /usr/bin/python3 + numpy; the
// runtime cross-check re-runs numpy when it is installed).
#include "model/engram_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>

#include "model/presets.h"

namespace cedar {
namespace {

using u128 = unsigned __int128;

u128 u128_of(uint64_t hi, uint64_t lo) { return (u128(hi) << 64) | lo; }

TEST(NumpyRng, SeedSequencePoolAndState) {
  struct Case {
    uint64_t seed;
    std::array<uint32_t, 4> pool;
    std::array<uint64_t, 4> state;
  };
  const Case cases[] = {
      {0,
       {0xfe40eb07, 0x4f363a36, 0x4eb2009d, 0xc89a7aa7},
       {0xdb2cd7e7b0f478be, 0xabf4641a2c71ba49, 0x20c6ed6d9d7b8d41, 0x2c4099de223c39d4}},
      {10007,
       {0xf1a1018d, 0xa7c60c02, 0xfd15d50a, 0x3b81232},
       {0x77d32a348ad70d07, 0x993ed609b84a4fa5, 0xd5f972dec8698e49, 0x7d79ebaebcf148de}},
      // two entropy words
      {(uint64_t(1) << 40) + 123,
       {0xefd0f268, 0x135eaec2, 0x43db727e, 0xeb363f3},
       {0x19f41353fbe7eaca, 0xf7a32069bb8c4197, 0x9b5333b453b4ad39, 0x26c13f6a434344f}},
      {~uint64_t(0),
       {0xfaf3ecf4, 0xfa0f8930, 0xe9f89a67, 0xe23d1f9},
       {0xaebca151928cad0d, 0x119c30448638dc7a, 0x1bbb155659e642a7, 0xa76b11e3e8c4a8f6}},
  };
  for (const auto& c : cases) {
    NumpySeedSequence ss(c.seed);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(ss.pool()[i], c.pool[size_t(i)]) << c.seed << " " << i;
    auto st = ss.generate_state_u64(4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(st[size_t(i)], c.state[size_t(i)]) << c.seed << " " << i;
  }
}

TEST(NumpyRng, PCG64StateAndRawOutput) {
  NumpyPCG64 g(10007);
  EXPECT_TRUE(g.state() == u128_of(0x3b34af7676e8ddd5, 0x556a026c98a77d27));
  EXPECT_TRUE(g.inc() == u128_of(0xabf2e5bd90d31c92, 0xfaf3d75d79e291bd));
  EXPECT_EQ(g.next_uint64(), 0xd2c3f84026661e33ull);
  EXPECT_EQ(g.next_uint64(), 0x0d4fb6969eb57435ull);
  EXPECT_EQ(g.next_uint64(), 0x62e6e1c58c3bd72bull);

  NumpyPCG64 z(0);
  EXPECT_TRUE(z.state() == u128_of(0x1aa1b5345996452d, 0x09585eb7a69561e3));
  EXPECT_EQ(z.next_uint64(), 0xa30febcfd9c2825full);
  // next_uint32 hands out the low half first, then the buffered high half.
  NumpyPCG64 z2(0);
  z2.next_uint64();
  EXPECT_EQ(z2.next_uint32(), 0x82d9d721u);
  EXPECT_EQ(z2.next_uint32(), 0x4510bdf8u);
}

TEST(NumpyRng, IntegersAllPaths) {
  // g = default_rng(s); g.integers(0,1000,5); g.integers(-5,2**32-5,3); g.integers(0,1,2);
  // g.integers(-2**62,2**62,3); g.integers(0,7,3)  -- one generator, in this order, so the 32-bit
  // buffer carried between calls is exercised too.
  struct Case {
    uint64_t seed;
    std::vector<int64_t> a, b, c, d;
  };
  const Case cases[] = {
      {0,
       {850, 636, 511, 269, 307},
       {175979940, 323153944, 70985649},
       {2889407964218599581, 3806998249519189543, 983541432339323199},
       {6, 5, 4}},
      {10007,
       {149, 823, 619, 51, 547},
       {1659298240, 1286169406, 3414020516},
       {-652252751024830404, 2364727712969649012, -2560000306916551566},
       {6, 0, 5}},
  };
  for (const auto& c : cases) {
    NumpyPCG64 g(c.seed);
    EXPECT_EQ(numpy_integers_int64(g, 0, 1000, 5), c.a);
    EXPECT_EQ(numpy_integers_int64(g, -5, (int64_t(1) << 32) - 5, 3), c.b);
    EXPECT_EQ(numpy_integers_int64(g, 0, 1, 2), (std::vector<int64_t>{0, 0}));
    EXPECT_EQ(numpy_integers_int64(g, -(int64_t(1) << 62), int64_t(1) << 62, 3), c.c);
    EXPECT_EQ(numpy_integers_int64(g, 0, 7, 3), c.d);
  }
  NumpyPCG64 g(1);
  EXPECT_THROW(numpy_integers_int64(g, 5, 5, 1), std::runtime_error);
}

TEST(EngramLayout, MultipliersMatchSpecAndNumpy) {
  // spec §8.2 (there marked UNCONFIRMED; numpy 1.24.2 reproduces them exactly)
  EXPECT_EQ(engram_hash_multipliers(1, 99092, 4),
            (std::vector<int64_t>{76632096046245, 4839876093313, 35959672319349, 73987337458391}));
  EXPECT_EQ(engram_hash_multipliers(14, 99092, 4),
            (std::vector<int64_t>{67716810739261, 51510806800915, 30921347202721, 82619226485591}));
  // tiny preset's second engram layer, and other vocab sizes (numpy)
  EXPECT_EQ(engram_hash_multipliers(2, 99092, 4),
            (std::vector<int64_t>{76507469730479, 37097805264573, 22647385550623, 71424551940645}));
  EXPECT_EQ(engram_hash_multipliers(14, 1000, 4),
            (std::vector<int64_t>{6710194209774885, 5104308867516367, 3064058137012075,
                                  8186904390910353}));
  EXPECT_EQ(engram_hash_multipliers(1, 3, 4),
            (std::vector<int64_t>{2531209220471544413, 159864333946207753, 1187771949822987911,
                                  2443851081142341771}));
  for (auto m : engram_hash_multipliers(7, 99092, 4)) EXPECT_EQ(m % 2, 1);
}

TEST(EngramLayout, IsPrime) {
  int count = 0;
  for (uint64_t n = 0; n < 1000; ++n) count += is_prime_u64(n);
  EXPECT_EQ(count, 168);
  EXPECT_TRUE(is_prime_u64(16000057));
  EXPECT_FALSE(is_prime_u64(16000059));
  EXPECT_TRUE(is_prime_u64(18446744073709551557ull));  // largest 64-bit prime
  EXPECT_FALSE(is_prime_u64(3215031751ull));           // strong pseudoprime to bases 2,3,5,7
}

TEST(EngramLayout, ReleasedPrimesOffsetsAndRows) {
  const ModelConfig cfg = preset_config("released");
  const EngramLayout L = EngramLayout::build(cfg);
  ASSERT_EQ(L.layer_ids, (std::vector<int>{1, 14}));
  ASSERT_EQ(L.n_cols(), 24);
  // spec §8.3 table
  const std::vector<std::vector<std::vector<int64_t>>> want = {
      {{16000057, 16000079, 16000081, 16000097, 16000121, 16000129, 16000133, 16000183},
       {16000189, 16000207, 16000211, 16000253, 16000277, 16000289, 16000307, 16000321},
       {16000339, 16000381, 16000393, 16000399, 16000403, 16000409, 16000447, 16000463}},
      {{16000477, 16000487, 16000499, 16000507, 16000511, 16000573, 16000609, 16000627},
       {16000667, 16000669, 16000693, 16000697, 16000711, 16000729, 16000759, 16000769},
       {16000781, 16000799, 16000813, 16000819, 16000841, 16000877, 16000879, 16000889}}};
  EXPECT_EQ(L.primes, want);
  EXPECT_EQ(L.num_embeddings, (std::vector<int64_t>{384006168, 384016682}));
  EXPECT_EQ(L.num_embeddings, cfg.engram_num_embeddings);
  const std::vector<int64_t> off1 = {
      0,         16000057,  32000136,  48000217,  64000314,  80000435,  96000564,  112000697,
      128000880, 144001069, 160001276, 176001487, 192001740, 208002017, 224002306, 240002613,
      256002934, 272003273, 288003654, 304004047, 320004446, 336004849, 352005258, 368005705};
  EXPECT_EQ(L.offsets[0], off1);
  EXPECT_EQ(L.offsets[1][8], 128004290);
  EXPECT_EQ(L.offsets[1][23], 368015793);
  EXPECT_EQ(L.multipliers[1][0], 67716810739261);

  // Row ids from the spec formula (P_s = t_s*mu_s, rolling XOR, mod prime + offset), computed
  // with Python integers.
  const int64_t ids_a[4] = {5, 17, 99091, 0};
  EXPECT_EQ(
      engram_hash_rows(L, 0, ids_a),
      (std::vector<int64_t>{3889985,   30570021,  40268302,  53854578,  74235168,  81029010,
                            100426120, 118891433, 143562967, 153520896, 165847521, 186163984,
                            201532732, 215229454, 227289662, 255349519, 267442262, 277395837,
                            293829661, 319550038, 321253249, 348643708, 353381273, 368242598}));
  const int64_t ids_b[4] = {99091, 99091, 99091, 99091};
  EXPECT_EQ(
      engram_hash_rows(L, 1, ids_b),
      (std::vector<int64_t>{11374428,  25091813,  43617803,  57220055,  64396657,  95639585,
                            110409065, 125397095, 139959227, 147368762, 164939877, 182756675,
                            200610703, 213273209, 227694064, 243385862, 266572408, 276569763,
                            290740789, 310432482, 324536558, 339160626, 355582586, 375878100}));
  const int64_t bad[4] = {5, 99092, 0, 0};
  EXPECT_THROW(engram_hash_rows(L, 0, bad), std::runtime_error);
  EXPECT_THROW(engram_hash_rows(L, 2, ids_a), std::runtime_error);
}

TEST(EngramLayout, PresetsTablesAreSumsOfFreshPrimes) {
  for (const char* name : {"tiny", "small"}) {
    const ModelConfig cfg = preset_config(name);
    const EngramLayout L = EngramLayout::build(cfg);
    ASSERT_EQ(L.primes.size(), 2u) << name;
    std::vector<int64_t> all;
    for (size_t i = 0; i < L.primes.size(); ++i) {
      int64_t sum = 0;
      for (const auto& order : L.primes[i]) {
        ASSERT_EQ(order.size(), 2u);
        EXPECT_GT(order[0], 999);  // the search starts above engram_vocab_size - 1
        EXPECT_LT(order[0], order[1]);
        for (auto p : order) {
          EXPECT_TRUE(is_prime_u64(uint64_t(p)));
          all.push_back(p);
          sum += p;
        }
      }
      EXPECT_EQ(sum, cfg.engram_num_embeddings[i]) << name;
      EXPECT_EQ(L.num_embeddings[i], sum);
    }
    std::sort(all.begin(), all.end());
    EXPECT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end()) << "prime reused";
    // the first three primes above 999 are 1009, 1013, 1019: order 2 of layer 0 takes 1009,1013
    EXPECT_EQ(L.primes[0][0], (std::vector<int64_t>{1009, 1013}));
    EXPECT_EQ(L.primes[0][1], (std::vector<int64_t>{1019, 1021}));  // restart, skip used ones
  }
}

// Cross-check against numpy on many seeds when /usr/bin/python3 has numpy.
TEST(NumpyRng, MatchesNumpyOnManySeeds) {
  const char* script =
      "/usr/bin/python3 -c \"import numpy as np\n"
      "for s in range(0, 200000, 1733):\n"
      "  g = np.random.default_rng(s)\n"
      "  hi = [3, 1000, 2**31 + 7, 2**32, 2**33 + 1, 46539438283891, 2**63 - 1][s % 7]\n"
      "  print(s, hi, *g.integers(0, hi, size=6, dtype=np.int64).tolist())\n"
      "\" 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(script, "r"), &pclose);
  if (!p) GTEST_SKIP() << "cannot run /usr/bin/python3";
  std::string text;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p.get())) text.append(buf, n);
  if (text.empty()) GTEST_SKIP() << "/usr/bin/python3 with numpy is not available";
  std::istringstream in(text);
  int lines = 0;
  uint64_t seed;
  int64_t hi;
  while (in >> seed >> hi) {
    std::vector<int64_t> want(6);
    for (auto& v : want) in >> v;
    NumpyPCG64 g(seed);
    EXPECT_EQ(numpy_integers_int64(g, 0, hi, 6), want) << "seed " << seed << " high " << hi;
    ++lines;
  }
  EXPECT_EQ(lines, 116);
}

}  // namespace
}  // namespace cedar
