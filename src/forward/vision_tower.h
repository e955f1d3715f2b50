// The vision tower's forward (v41-extras.md §3.2-3.3; docs/VISION.md "Arithmetic"): DeepSeek-ViT
// over one image's patches (pre-norm blocks, fused wqkv with bias, 2D rotate-half RoPE,
// bidirectional attention, SwiGLU) and the aligner (3x3 pixel unshuffle, a two-layer GELU MLP),
// through the kernel socket: the image's rows in the language model's width.
#pragma once

#include <vector>

#include "forward/linear.h"
#include "forward/weights.h"
#include "model/config.h"
#include "vision/image_processor.h"

namespace cedar {

// The aligner's rows of one image, [n_llm_h * n_llm_w, hidden_size] bf16 values in reading order
// (the IMAGE rows of its span). Throws std::invalid_argument when the patches do not match the
// model's vision_config (patch width, grid). ref: vision.py ViT.forward, Aligner.forward
std::vector<float> encode_image(const Ctx& ctx, const ModelConfig& c, const VisionWeights& W,
                                const vision::ImagePatches& patches);

}  // namespace cedar
