#include "app/bench_vision.h"

#include <chrono>
#include <cstdio>
#include <vector>

#include "runtime/bench_probes.h"
#include "vision/image_processor.h"

namespace cedar::app {

namespace {

// FLOPs of the tower and the aligner on one image (2 per multiply-add): the patch embedding,
// per block wqkv, QK^T and PV, wo, the MLP, then the aligner's two layers.
double tower_flops(const ModelConfig& c, const vision::ImagePlan& p) {
  const VisionConfig& v = c.vision;
  const double n = double(p.n_vit_h) * p.n_vit_w, V = v.hidden_size, I = v.intermediate_size;
  const double T = double(p.n_llm_h) * p.n_llm_w, D = c.hidden_size;
  const double r2 = double(v.downsample_ratio) * v.downsample_ratio;
  const double block =
      2 * n * V * 3 * V + 2 * 2 * n * n * V + 2 * n * V * V + 2 * n * V * 2 * I + 2 * n * I * V;
  return 2 * n * v.patch_dim() * V + v.num_hidden_layers * block + 2 * T * r2 * V * D +
         2 * T * D * D;
}

}  // namespace

VisionBench bench_vision(runtime::Engine& engine, int reps, double fma_peak_flops) {
  const ModelConfig& cfg = engine.config();
  const vision::VisionGeometry g = vision::geometry_of(cfg.vision);
  // a square larger than the token budget allows: the processor scales it to the largest grid
  vision::RgbImage img;
  img.width = img.height = 4096;
  img.rgb.resize(size_t(img.width) * img.height * 3);
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x)
      for (int ch = 0; ch < 3; ++ch)
        img.rgb[(size_t(y) * img.width + x) * 3 + ch] =
            uint8_t((x * (ch + 1) + y * (3 - ch)) & 0xFF);
  using Clock = std::chrono::steady_clock;
  std::vector<double> pre_s, enc_s;
  vision::ImagePatches p;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    p = vision::preprocess_image(img, g);
    const auto t1 = Clock::now();
    const std::vector<float> rows = engine.encode_image(p);
    const auto t2 = Clock::now();
    pre_s.push_back(std::chrono::duration<double>(t1 - t0).count());
    enc_s.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  const double flops = tower_flops(cfg, p.plan), enc = bench::median(enc_s),
               pre = bench::median(pre_s);
  const vision::ImagePlan& pl = p.plan;
  VisionBench out;
  out.json = {{"image", {img.width, img.height}},
              {"resized", {pl.best_width, pl.best_height}},
              {"patches", int64_t(pl.n_vit_h) * pl.n_vit_w},
              {"tokens", pl.tokens()},
              {"reps", reps},
              {"preprocess_s", pre},
              {"encode_s", enc},
              {"encode_gflop", flops / 1e9},
              {"encode_gflop_per_s", flops / enc / 1e9},
              {"ratio_fma_peak", flops / enc / fma_peak_flops}};
  char line[320];
  std::snprintf(line, sizeof line,
                "  %dx%d -> %dx%d px, %d patches, %d tokens: preprocess %.3f s, tower + aligner "
                "%.3f s (%.2f GFLOP, %.1f GFLOP/s = %.1f%% of the FMA peak)\n",
                img.width, img.height, pl.best_width, pl.best_height, pl.n_vit_h * pl.n_vit_w,
                pl.tokens(), pre, enc, flops / 1e9, flops / enc / 1e9,
                100.0 * flops / enc / fma_peak_flops);
  out.line = line;
  return out;
}

}  // namespace cedar::app
