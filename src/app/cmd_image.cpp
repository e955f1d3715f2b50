// `cedar image FILE [-m DIR] [--json] [--patches OUT.npy] [--pixels OUT.npy] [--embed OUT.npy]`:
// what the image processor (the release's, or the vision_config of the model in DIR) makes of an
// image (docs/VISION.md): its format and size, the size it is letterboxed to, the patch and token
// grids and the number of prompt tokens it costs. --patches writes the ViT input (bf16 bits,
// [patches, 588] uint16) and --pixels the letterboxed RGB ([H, W, 3] uint8), for the comparisons
// against the reference processor (tests/model/test_image_processor.sh); --embed runs the model's
// vision tower and aligner and writes the image's rows (float32 [n_llm_h * n_llm_w, hidden]),
// the oracle comparison of tests/model/test_vision_tower.sh.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>

#include "app/commands.h"
#include "app/load_model.h"
#include "app/read_file.h"
#include "base/args.h"
#include "base/npy.h"
#include "base/thread_pool.h"
#include "forward/vision_tower.h"
#include "forward/weights.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "vision/image_decode.h"
#include "vision/image_processor.h"

namespace cedar::app {

namespace {

// --embed: the aligner rows of the image, through the model's vision tower.
void write_embedding(const Args& args, const vision::ImagePatches& p) {
  const KernelTable& kernels = choose_kernels(args.get("kernels", ""));
  const int threads = threads_option(args, "cedar image");
  auto ckpt = Checkpoint::open(args.get("model"));
  const ModelWeights weights = ModelWeights::bind(*ckpt);
  ThreadPool pool(threads);
  const Ctx ctx{kernels, pool};
  const std::vector<float> rows = encode_image(ctx, ckpt->config(), weights.vision, p);
  NpyWriter w(args.get("embed"),
              {int64_t(p.plan.n_llm_h) * p.plan.n_llm_w, int64_t(ckpt->config().hidden_size)},
              "<f4");
  w.write(rows.data(), rows.size() * sizeof(float));
  w.close();
}

}  // namespace

int cmd_image(int argc, char** argv) {
  Args args("image",
            {{"model", "m", true, "use this model's vision_config (default: the release's)"},
             {"json", "", false, "print the plan as JSON"},
             {"patches", "", true, "write the ViT patches (bf16 bits) to this .npy"},
             {"pixels", "", true, "write the letterboxed RGB pixels to this .npy"},
             {"embed", "", true, "run the vision tower of -m; write the image's rows to this .npy"},
             {"kernels", "", true, kKernelsHelp},
             {"threads", "t", true, "worker threads for --embed (default: all cores)"}});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s  FILE   a PNG, JPEG, WebP or GIF image\n", args.usage().c_str());
    return 0;
  }
  if (args.positional().size() != 1)
    throw std::runtime_error("expected exactly one image FILE, got " +
                             std::to_string(args.positional().size()));
  const std::string& path = args.positional()[0];
  const std::string bytes = read_file(path, "image");
  const std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  const vision::ImageFormat fmt = vision::sniff_image_format(data);
  const vision::RgbImage img = vision::decode_image(data);
  vision::VisionGeometry g;
  if (args.has("model")) {
    const ModelConfig cfg = ModelConfig::from_file(args.get("model") + "/config.json");
    if (!cfg.has_vision)
      throw std::runtime_error(args.get("model") + ": the model has no vision tower");
    g = vision::geometry_of(cfg.vision);
  }
  const vision::ImagePatches p = vision::preprocess_image(img, g);
  if (args.has("pixels") && g.max_wh_ratio > 0)
    throw std::runtime_error("--pixels: only for the letterbox (a model without max_wh_ratio)");
  const vision::ImagePlan& plan = p.plan;
  if (args.has("patches")) {
    NpyWriter w(args.get("patches"), {int64_t(plan.n_vit_h) * plan.n_vit_w, int64_t(p.patch_dim)},
                "<u2");
    w.write(p.bf16.data(), p.bf16.size() * sizeof(uint16_t));
    w.close();
  }
  if (args.has("pixels")) {
    const vision::RgbImage px = vision::letterbox(img, plan.best_width, plan.best_height);
    NpyWriter w(args.get("pixels"), {px.height, px.width, 3}, "|u1");
    w.write(px.rgb.data(), px.rgb.size());
    w.close();
  }
  if (args.has("embed")) {
    if (!args.has("model")) throw std::runtime_error("--embed needs the model (-m DIR)");
    write_embedding(args, p);
  }
  if (args.has("json")) {
    const nlohmann::json j = {{"format", vision::image_format_name(fmt)},
                              {"width", plan.width},
                              {"height", plan.height},
                              {"best_width", plan.best_width},
                              {"best_height", plan.best_height},
                              {"n_vit_h", plan.n_vit_h},
                              {"n_vit_w", plan.n_vit_w},
                              {"n_llm_h", plan.n_llm_h},
                              {"n_llm_w", plan.n_llm_w},
                              {"tokens", plan.tokens()}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s: %s %dx%d -> %dx%d px, %dx%d patches, %dx%d token grid, %d prompt tokens\n",
                path.c_str(), vision::image_format_name(fmt), plan.width, plan.height,
                plan.best_width, plan.best_height, plan.n_vit_w, plan.n_vit_h, plan.n_llm_w,
                plan.n_llm_h, plan.tokens());
  }
  return 0;
}

}  // namespace cedar::app
