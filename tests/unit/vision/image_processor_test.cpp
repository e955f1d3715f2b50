#include "vision/image_processor.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "numerics/bf16.h"
#include "vision/resample.h"

namespace {

using namespace cedar::vision;

// v41-extras.md §3.1's worked examples.
TEST(ImageProcessor, PlansTheSpecsWorkedExamples) {
  const ImagePlan a = plan_image(224, 224);
  EXPECT_EQ(a.best_width, 546);
  EXPECT_EQ(a.n_vit_w, 39);
  EXPECT_EQ(a.n_llm_w, 13);
  EXPECT_EQ(a.tokens(), 184);
  const ImagePlan b = plan_image(1024, 768);
  EXPECT_EQ(b.best_width, 1036);
  EXPECT_EQ(b.best_height, 770);
  EXPECT_EQ(b.n_vit_w, 74);
  EXPECT_EQ(b.n_vit_h, 55);
  EXPECT_EQ(b.tokens(), 496);
  const ImagePlan c = plan_image(1920, 1080);
  EXPECT_EQ(c.best_width, 1708);
  EXPECT_EQ(c.best_height, 966);
  EXPECT_EQ(c.n_llm_w, 41);
  EXPECT_EQ(c.n_llm_h, 23);
  EXPECT_EQ(c.tokens(), 968);
  EXPECT_THROW(plan_image(0, 5), std::invalid_argument);
}

TEST(ImageProcessor, NeverExceedsTheTokenBudget) {
  for (int w : {1, 2, 7, 100, 999, 4000, 30000})
    for (int h : {1, 3, 50, 1000, 7777, 30000}) {
      const ImagePlan p = plan_image(w, h);
      EXPECT_LE(p.tokens(), 1024) << w << "x" << h;
      EXPECT_EQ(p.best_width % 14, 0);
      EXPECT_EQ(p.best_height % 14, 0);
      EXPECT_GT(p.n_llm_h, 0);
      EXPECT_GT(p.n_llm_w, 0);
    }
}

TEST(ImageProcessor, TokenTypesFrameTheGrid) {
  const auto t = image_token_types(2, 3);
  const std::vector<int8_t> want = {kImageStart, kImage, kImage, kImage,        kImageNewline,
                                    kImage,      kImage, kImage, kImageNewline, kImageEnd};
  EXPECT_EQ(t, want);
  ImagePlan p;
  p.n_llm_h = 2;
  p.n_llm_w = 3;
  EXPECT_EQ(int(t.size()), p.tokens());
}

// A flat image stays flat through the resampler and the letterbox, and the patches carry the
// normalised value in (channel, row, col) order.
TEST(ImageProcessor, FlatImageGivesFlatPatchesAndGreyBars) {
  RgbImage img(300, 100);
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    img.rgb[i] = 255;
    img.rgb[i + 1] = 0;
    img.rgb[i + 2] = 51;
  }
  const RgbImage r = resize_bicubic(img, 123, 45);
  for (size_t i = 0; i < r.rgb.size(); i += 3) {
    ASSERT_EQ(r.rgb[i], 255);
    ASSERT_EQ(r.rgb[i + 1], 0);
    ASSERT_EQ(r.rgb[i + 2], 51);
  }
  const ImagePatches p = preprocess_image(img);
  const ImagePlan& pl = p.plan;
  EXPECT_EQ(p.patch_dim, 588);
  ASSERT_EQ(p.bf16.size(), size_t(pl.n_vit_h) * pl.n_vit_w * 588);
  // the first patch row is grey bar (a wide image is padded above and below)
  EXPECT_EQ(p.bf16[0], cedar::f32_to_bf16_bits((127.0f / 255.0f - 0.5f) / 0.5f));
  // a patch in the middle: red channel first (1.0), then green (-1.0), then blue
  const size_t mid = (size_t(pl.n_vit_h / 2) * pl.n_vit_w + pl.n_vit_w / 2) * 588;
  EXPECT_EQ(cedar::bf16_to_f32(p.bf16[mid]), 1.0f);
  EXPECT_EQ(cedar::bf16_to_f32(p.bf16[mid + 196]), -1.0f);
  EXPECT_EQ(p.bf16[mid + 392], cedar::f32_to_bf16_bits((51.0f / 255.0f - 0.5f) / 0.5f));
}

}  // namespace
