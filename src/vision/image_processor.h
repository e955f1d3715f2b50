// The release's image processor (v41-extras.md §3.1; ref: inference/image_processor.py): the
// pixel size an image is resized to (a multiple of the 14-px patch, at least min_pixels, at most
// max_tokens LLM tokens after the 3x3 aligner), the letterbox onto that size (PIL's
// `ImageOps.pad`, grey 127), the normalisation to [-1, 1] in bf16 and the patches in the ViT's
// order. Integer and float steps follow the reference's Python one by one (true division,
// floor/ceil, round-half-even), so the token count and every bf16 value are the reference's.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "vision/image.h"

namespace cedar::vision {

// What the processor is configured with (the release's values by default).
struct VisionGeometry {
  int patch = 14;
  int downsample = 3;     // aligner cell: downsample x downsample patches a token
  int max_tokens = 1024;  // LLM tokens of one image, delimiters and newlines included
  int64_t min_pixels = 295936;
  double max_wh_ratio = 0;  // > 0: cap width / height there (the release: none)
};

// The processor of a model: its vision_config's patch, downsample, token and pixel limits.
VisionGeometry geometry_of(const VisionConfig& v);

// Token types of an image span (the reference's TEXT = -1 marks text rows).
enum ImageTokenType : int8_t { kImageStart = 0, kImage = 1, kImageNewline = 2, kImageEnd = 3 };

struct ImagePlan {
  int width = 0, height = 0;            // the decoded image
  int best_width = 0, best_height = 0;  // the ViT input (multiples of patch)
  int n_vit_h = 0, n_vit_w = 0;         // patch grid
  int n_llm_h = 0, n_llm_w = 0;         // token grid after the aligner
  int tokens() const { return n_llm_h * (n_llm_w + 1) + 2; }
};

// ref: plan_image_grid / safe_resize / solve_resize_ratio. Throws std::invalid_argument on an
// empty image.
ImagePlan plan_image(int width, int height, const VisionGeometry& g = {});

// Memory, counted in RGB pixels (3 bytes), for budgeting image work before it starts: the
// patches of a plan (bf16, 6 bytes per pixel of the ViT input), and the most preprocess_image
// holds at once beside the decoded image -- the bicubic's horizontal pass (the new width by the
// old height), the resized and the letterboxed image, and the patches.
int64_t patch_pixels(const ImagePlan& p);
int64_t preprocess_pixels(const ImagePlan& p);

// ref: PIL ImageOps.pad(image, (width, height), BICUBIC, color=(127,127,127)): resized to fit
// keeping its aspect ratio, centred on grey.
RgbImage letterbox(const RgbImage& img, int width, int height);

struct ImagePatches {
  ImagePlan plan;
  int patch_dim = 0;           // 3 * patch * patch (588)
  std::vector<uint16_t> bf16;  // [n_vit_h * n_vit_w, patch_dim], each (channel, row, col)
};

// The whole processor: plan, letterbox (or plain resize under max_wh_ratio), normalise, patchify.
ImagePatches preprocess_image(const RgbImage& img, const VisionGeometry& g = {});

// START, (IMAGE x n_llm_w, NEWLINE) x n_llm_h, END -- the span the placeholder expands to.
std::vector<int8_t> image_token_types(int n_llm_h, int n_llm_w);

}  // namespace cedar::vision
