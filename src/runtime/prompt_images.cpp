#include "runtime/prompt_images.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "text/sha256.h"
#include "vision/image_decode.h"

namespace cedar {

uint64_t image_digest(const vision::ImagePatches& p) {
  const vision::ImagePlan& g = p.plan;
  const int32_t head[] = {g.n_vit_h, g.n_vit_w, g.n_llm_h, g.n_llm_w, p.patch_dim};
  text::Sha256 sha;
  sha.update(head, sizeof head);
  sha.update(p.bf16.data(), p.bf16.size() * sizeof(uint16_t));
  const auto h = sha.digest();
  uint64_t d = 0;
  std::memcpy(&d, h.data(), sizeof d);
  return d;
}

std::shared_ptr<const vision::ImagePatches> preprocess_image_file(const ModelConfig& cfg,
                                                                  std::span<const uint8_t> bytes) {
  if (!cfg.has_vision) throw std::invalid_argument("the model has no vision tower");
  const vision::RgbImage img = vision::decode_image(bytes);
  return std::make_shared<const vision::ImagePatches>(
      vision::preprocess_image(img, vision::geometry_of(cfg.vision)));
}

ExpandedPrompt expand_images(std::span<const int32_t> ids, int32_t placeholder,
                             std::span<const vision::ImagePlan> plans) {
  const auto n_ph = std::count(ids.begin(), ids.end(), placeholder);
  if (size_t(n_ph) != plans.size())
    throw std::invalid_argument("the prompt holds " + std::to_string(n_ph) +
                                " image placeholders for " + std::to_string(plans.size()) +
                                " images");
  ExpandedPrompt out;
  size_t k = 0;
  for (const int32_t id : ids) {
    if (id != placeholder) {
      out.ids.push_back(id);
      continue;
    }
    const vision::ImagePlan& p = plans[k++];
    const ImageSpan sp{int64_t(out.ids.size()), p.n_llm_h, p.n_llm_w};
    out.ids.insert(out.ids.end(), size_t(sp.length()), placeholder);
    out.spans.push_back(sp);
  }
  return out;
}

std::vector<PromptImage> attach_images(const ModelConfig& cfg, std::vector<int32_t>* ids,
                                       std::span<const std::string> encoded) {
  std::vector<std::shared_ptr<const vision::ImagePatches>> patches;
  for (size_t k = 0; k < encoded.size(); ++k) {
    try {
      patches.push_back(preprocess_image_file(
          cfg, std::span(reinterpret_cast<const uint8_t*>(encoded[k].data()), encoded[k].size())));
    } catch (const vision::ImageError& e) {
      throw vision::ImageError("image " + std::to_string(k) + ": " + e.what());
    }
  }
  return attach_patches(cfg, ids, std::move(patches));
}

std::vector<PromptImage> attach_patches(
    const ModelConfig& cfg, std::vector<int32_t>* ids,
    std::vector<std::shared_ptr<const vision::ImagePatches>> patches) {
  if (patches.empty()) return {};
  if (!cfg.has_vision) throw std::invalid_argument("the model has no vision tower");
  std::vector<PromptImage> out(patches.size());
  std::vector<vision::ImagePlan> plans;
  for (size_t k = 0; k < patches.size(); ++k) {
    out[k].digest = image_digest(*patches[k]);
    plans.push_back(patches[k]->plan);
    out[k].patches = std::move(patches[k]);
  }
  ExpandedPrompt e = expand_images(*ids, int32_t(cfg.image_token_id), plans);
  *ids = std::move(e.ids);
  for (size_t k = 0; k < out.size(); ++k) out[k].span = e.spans[k];
  return out;
}

std::span<const ImageInput> images_in(std::span<const ImageInput> all, int64_t p0, int n) {
  auto first = std::find_if(all.begin(), all.end(),
                            [&](const ImageInput& im) { return im.span.end() > p0; });
  auto last = std::find_if(first, all.end(),
                           [&](const ImageInput& im) { return im.span.first_pos >= p0 + n; });
  return {first, last};
}

std::vector<int32_t> identity_ids(std::span<const int32_t> ids,
                                  std::span<const PromptImage> images) {
  std::vector<int32_t> key(ids.begin(), ids.end());
  for (const PromptImage& im : images)
    for (int64_t p = im.span.first_pos; p < std::min<int64_t>(im.span.end(), int64_t(key.size()));
         ++p) {
      // splitmix64 of (digest, offset): 31 bits of it, as a value in [-2^31, -1]
      uint64_t z = im.digest + 0x9E3779B97F4A7C15ull * uint64_t(p - im.span.first_pos + 1);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      key[size_t(p)] = -1 - int32_t(z & 0x7FFFFFFFu);
    }
  return key;
}

}  // namespace cedar
