// Images through the runtime (docs/VISION.md "Images in the prompt") on a generated tiny model
// (its two-block vision tower), greedy and exact prefill so that every path is comparable bit
// for bit:
//  * the Generator with PromptImages gives the tokens of a direct Transformer forward over the
//    expanded prompt with the encoded rows;
//  * session reuse across turns keeps the image (cached tokens past its span) and continues as
//    a cold run does; the same turn with another image at the same place reuses only the text
//    before it (identity ids) and answers as a cold run with that image;
//  * the prefix cache's memory tier: a whole hit reuses the image's rows, another image is a
//    miss past the text before it, and a truncated candidate never needs a replay of image rows;
//  * the disk tier: units key on the images too and carry their spans;
//  * placeholders, identities and bad input: counts that differ, a corrupt image, a model
//    without a tower.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "forward/vision_tower.h"
#include "runtime/engine.h"
#include "runtime/generator.h"
#include "runtime/prefix_cache.h"
#include "runtime/prompt_images.h"
#include "vision/image_decode.h"

namespace cedar::runtime {
namespace {

std::string cedar_bin() {
  const char* e = std::getenv("CEDAR_BIN");
  return e && *e ? e : CEDAR_BIN;
}

class TinyVision : public ::testing::Environment {
 public:
  static std::string dir;
  void SetUp() override {
    char tmpl[] = "/tmp/cedar-image-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir = root_ + "/tiny";
    const std::string cmd = cedar_bin() + " make-model --preset tiny --seed 3 --out " + dir;
    ASSERT_EQ(std::system((cmd + " > /dev/null 2>&1").c_str()), 0) << cmd;
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

 private:
  std::string root_;
};
std::string TinyVision::dir;
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new TinyVision);

Engine& engine() {
  static std::unique_ptr<Engine> e;
  if (!e) {
    EngineOptions o;
    o.model_dir = TinyVision::dir;
    o.threads = 2;
    e = Engine::load(o);
  }
  return *e;
}

std::string corpus(const std::string& name) {
  std::ifstream f(std::string(CEDAR_SOURCE_DIR) + "/tests/fuzz/corpus/image/" + name,
                  std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

constexpr int32_t kPh = 129264;

// text, one placeholder, text: expanded with `image`
struct Case {
  std::vector<int32_t> ids;
  std::vector<PromptImage> images;
};
Case make_case(const std::string& image, std::vector<int32_t> before = {0, 100, 200},
               std::vector<int32_t> after = {300, 400, 500}) {
  Case c;
  c.ids = before;
  c.ids.push_back(kPh);
  c.ids.insert(c.ids.end(), after.begin(), after.end());
  const std::string bytes[] = {corpus(image)};
  c.images = attach_images(engine().config(), &c.ids, bytes);
  return c;
}

GenerationOptions greedy(int64_t n, std::span<const PromptImage> images) {
  GenerationOptions o;
  o.sampling.temperature = 0.0;
  o.max_tokens = n;
  o.exact_prefill = true;
  o.images = images;
  return o;
}

std::vector<int32_t> cold(const Case& c, int n) {
  Generator g(engine());
  return g.generate(c.ids, greedy(n, c.images)).tokens;
}

TEST(ImagePrompt, ExpandsPlaceholdersAndKeysByDigest) {
  const Case a = make_case("rgb.png"), b = make_case("rgb.jpg");
  ASSERT_EQ(a.images.size(), 1u);
  const ImageSpan& sp = a.images[0].span;
  EXPECT_EQ(sp.first_pos, 3);
  EXPECT_EQ(int64_t(a.ids.size()), 3 + sp.length() + 3);
  for (int64_t p = sp.first_pos; p < sp.end(); ++p) EXPECT_EQ(a.ids[size_t(p)], kPh);
  EXPECT_EQ(a.ids.back(), 500);
  // the same image twice: the same identity; another image: other identity values, text kept
  const Case a2 = make_case("rgb.png");
  EXPECT_EQ(identity_ids(a.ids, a.images), identity_ids(a2.ids, a2.images));
  ASSERT_EQ(a.ids.size(), b.ids.size()) << "both corpus images plan to the same grid";
  const auto ka = identity_ids(a.ids, a.images), kb = identity_ids(b.ids, b.images);
  for (int64_t p = 0; p < int64_t(ka.size()); ++p) {
    if (sp.covers(p)) {
      EXPECT_LT(ka[size_t(p)], 0);
      EXPECT_NE(ka[size_t(p)], kb[size_t(p)]) << p;
    } else {
      EXPECT_EQ(ka[size_t(p)], a.ids[size_t(p)]);
    }
  }
}

TEST(ImagePrompt, GeneratorMatchesDirectForward) {
  const Case c = make_case("rgb.png");
  const std::vector<int32_t> got = cold(c, 6);
  // the same prompt straight through the Transformer, greedy
  Engine& e = engine();
  SequenceState st = e.model().new_state();
  const std::vector<float> rows = e.encode_image(*c.images[0].patches);
  const ImageInput in{c.images[0].span, rows.data()};
  ForwardOptions fo;
  fo.mode = PrefillMode::kExact;
  fo.images = std::span<const ImageInput>(&in, 1);
  std::vector<float> logits(size_t(e.config().vocab_size));
  e.model().forward(st, c.ids.data(), int(c.ids.size()), 0, fo, logits.data());
  std::vector<int32_t> want;
  fo.images = {};
  for (int i = 0; i < 6; ++i) {
    const int32_t t = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    want.push_back(t);
    if (e.is_stop_token(t)) break;
    e.model().forward(st, &t, 1, st.n_tokens, fo, logits.data());
  }
  EXPECT_EQ(got, want);
  // and the image matters: the same ids with the placeholder rows as text differ
  Generator g(e);
  GenerationOptions text_only = greedy(6, {});
  EXPECT_NE(g.generate(c.ids, text_only).tokens, got);
}

// The next turn: the session's prompt + answer, then more text.
Case next_turn(const Case& c, const std::vector<int32_t>& answer) {
  Case n = c;
  n.ids.insert(n.ids.end(), answer.begin(), answer.end() - 1);
  for (int32_t t : {600, 700, 800}) n.ids.push_back(t);
  return n;
}

TEST(ImagePrompt, SessionReuseKeepsTheImageAndTellsImagesApart) {
  const Case c = make_case("rgb.png");
  Generator g(engine());
  const GenerationResult r1 = g.generate(c.ids, greedy(4, c.images));
  const Case next = next_turn(c, r1.tokens);
  const GenerationResult r2 = g.generate(next.ids, greedy(4, next.images));
  EXPECT_GT(r2.usage.cached_tokens, c.images[0].span.end());
  EXPECT_EQ(r2.tokens, cold(next, 4));
  // the same two turns with another image in the second: its ids extend what the session holds
  // but its image does not, so nothing is reused
  Generator h(engine());
  h.generate(c.ids, greedy(4, c.images));
  Case other = next;
  std::vector<int32_t> ids = {0, 100, 200, kPh, 300, 400, 500};
  const std::string bytes[] = {corpus("rgb.jpg")};
  other.images = attach_images(engine().config(), &ids, bytes);
  ASSERT_EQ(other.images[0].span, next.images[0].span);
  const GenerationResult r3 = h.generate(other.ids, greedy(4, other.images));
  EXPECT_EQ(r3.usage.cached_tokens, 0);
  EXPECT_EQ(r3.tokens, cold(other, 4));
  EXPECT_NE(r3.tokens, r2.tokens) << "two images gave the same answer (random weights)";
}

TEST(ImagePrompt, PrefixCacheMemoryTier) {
  PrefixCacheOptions po;
  po.interval = 0;
  PrefixCache cache(engine(), po);
  const Case c = make_case("rgb.png");
  const std::vector<int32_t> want = cold(c, 4);
  Generator g1(engine(), &cache);
  const GenerationResult r1 = g1.generate(c.ids, greedy(4, c.images));
  EXPECT_EQ(r1.tokens, want);
  // a new session whose prompt extends the cached answer: a whole hit, past the image
  const Case next = next_turn(c, r1.tokens);
  Generator g2(engine(), &cache);
  const GenerationResult r2 = g2.generate(next.ids, greedy(4, next.images));
  EXPECT_GT(r2.usage.cached_tokens, c.images[0].span.end());
  EXPECT_EQ(r2.tokens, cold(next, 4));
  // the same prompt again is a truncated candidate whose replay would cross the image: the
  // cache cuts it before the image (too short to be worth a replay), never fails a replay
  Generator g3(engine(), &cache);
  const GenerationResult r3 = g3.generate(c.ids, greedy(4, c.images));
  EXPECT_EQ(r3.usage.cached_tokens, 0);
  EXPECT_EQ(r3.tokens, want);
  EXPECT_EQ(cache.stats().replays, 0);
}

// Disk units key on the identity ids and carry the spans: an exact unit (with its window)
// restores past the image in a new process-like cache (memory cleared), a unit of another image
// is never a hit past the text before it, and a window-less unit is cut before the image (its
// replay could not rebuild the image's rows).
TEST(ImagePrompt, DiskTierKeysOnImages) {
  char tmpl[] = "/tmp/cedar-image-disk-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const Case c = make_case("rgb.png");
  const std::vector<int32_t> want = cold(c, 4);
  for (bool window : {true, false}) {
    PrefixCacheOptions po;
    po.disk_dir = dir + (window ? "/exact" : "/replay");
    po.store_window = window;
    po.interval = 0;
    PrefixCache cache(engine(), po);
    Generator g1(engine(), &cache);
    const GenerationResult r1 = g1.generate(c.ids, greedy(4, c.images));
    EXPECT_EQ(r1.tokens, want);
    cache.clear_memory();
    const Case next = next_turn(c, r1.tokens);
    Generator g2(engine(), &cache);
    const GenerationResult r2 = g2.generate(next.ids, greedy(4, next.images));
    EXPECT_EQ(r2.tokens, cold(next, 4)) << window;
    if (window) {
      EXPECT_GT(r2.usage.cached_tokens, c.images[0].span.end());
      EXPECT_EQ(cache.last_restore().source, RestoreInfo::Source::kDisk);
    } else {
      EXPECT_LE(r2.usage.cached_tokens, c.images[0].span.first_pos);
    }
    // the same next turn with another image: at most the text before it
    cache.clear_memory();
    Case other = next;
    std::vector<int32_t> ids = {0, 100, 200, kPh, 300, 400, 500};
    const std::string bytes[] = {corpus("rgb.jpg")};
    other.images = attach_images(engine().config(), &ids, bytes);
    Generator g3(engine(), &cache);
    const GenerationResult r3 = g3.generate(other.ids, greedy(4, other.images));
    EXPECT_LE(r3.usage.cached_tokens, other.images[0].span.first_pos);
    EXPECT_EQ(r3.tokens, cold(other, 4)) << window;
  }
  std::filesystem::remove_all(dir);
}

TEST(ImagePrompt, BadInputIsAClearError) {
  std::vector<int32_t> ids = {0, kPh, 5, kPh};
  const std::string one[] = {corpus("rgb.png")};
  EXPECT_THROW(attach_images(engine().config(), &ids, one), std::invalid_argument);
  std::string bad = corpus("rgb.png");
  bad.resize(bad.size() / 2);
  std::vector<int32_t> ids1 = {0, kPh, 5};
  const std::string trunc[] = {bad};
  try {
    attach_images(engine().config(), &ids1, trunc);
    FAIL() << "a truncated PNG was accepted";
  } catch (const vision::ImageError& e) {
    EXPECT_NE(std::string(e.what()).find("image 0"), std::string::npos) << e.what();
  }
  ModelConfig text_only = engine().config();
  text_only.has_vision = false;
  EXPECT_THROW(attach_images(text_only, &ids1, one), std::invalid_argument);
  // the forward refuses ids that are not the placeholder inside a span
  Case c = make_case("rgb.png");
  c.ids[size_t(c.images[0].span.first_pos + 2)] = 7;
  Generator g(engine());
  EXPECT_THROW(g.generate(c.ids, greedy(2, c.images)), std::runtime_error);
}

}  // namespace
}  // namespace cedar::runtime
