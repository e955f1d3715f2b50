// Images in a prompt (docs/VISION.md "Images in the prompt"): an image made into its aligner rows
// by the model's tower, a prompt's image placeholders expanded to the images' spans
// (v41-extras.md §3.4), the ImageInputs a forward call over some of its rows takes, and the
// identity of an image's positions for prefix reuse.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "forward/linear.h"
#include "forward/transformer.h"
#include "vision/image_processor.h"

namespace cedar {

// An image of a request, decoded and preprocessed (so it is valid) but not yet encoded: where
// its span lies in the expanded prompt, its patches and their digest.
struct PromptImage {
  ImageSpan span;
  std::shared_ptr<const vision::ImagePatches> patches;
  uint64_t digest = 0;  // image_digest(*patches)
};

// The first 8 bytes of the SHA-256 of the patches (their plan and bf16 values): two images are
// the same to the model exactly when their patches are.
uint64_t image_digest(const vision::ImagePatches& p);

// Decodes (vision::decode_image) and preprocesses an image file's bytes with the model's
// vision_config. Throws vision::ImageError on a bad image, std::invalid_argument on a model
// without a tower.
std::shared_ptr<const vision::ImagePatches> preprocess_image_file(const ModelConfig& cfg,
                                                                  std::span<const uint8_t> bytes);

struct ExpandedPrompt {
  std::vector<int32_t> ids;      // every span position holds the placeholder
  std::vector<ImageSpan> spans;  // ascending, one per image
};

// The k-th `placeholder` of ids becomes image k's span [START, (IMAGE x n_w, NEWLINE) x n_h,
// END]. Throws std::invalid_argument when the prompt holds another number of placeholders than
// there are images.
ExpandedPrompt expand_images(std::span<const int32_t> ids, int32_t placeholder,
                             std::span<const vision::ImagePlan> plans);

// The images of a prompt, from their encoded bytes (PNG, JPEG, WebP, GIF; in placeholder
// order): each decoded and preprocessed, and *ids expanded to their spans. Throws
// vision::ImageError naming the image (its index) on a bad one, std::invalid_argument on a
// model without a tower or a placeholder count that does not match.
std::vector<PromptImage> attach_images(const ModelConfig& cfg, std::vector<int32_t>* ids,
                                       std::span<const std::string> encoded);

// The same from images already preprocessed (the server decodes them under its pixel budget,
// server/image_pool.h): their digests, and *ids expanded to their spans.
std::vector<PromptImage> attach_patches(
    const ModelConfig& cfg, std::vector<int32_t>* ids,
    std::vector<std::shared_ptr<const vision::ImagePatches>> patches);

// The images whose spans overlap positions [p0, p0 + n): what a forward call over those rows
// takes (ForwardOptions::images).
std::span<const ImageInput> images_in(std::span<const ImageInput> all, int64_t p0, int n);

// The prefix identity of a prompt with images: ids with every image position replaced by a
// negative value drawn from the image's digest and the offset in its span, so that prompts
// compare equal (session reuse, the prefix cache) only where their images are the same. Text
// positions keep their ids; a negative id is never a token.
std::vector<int32_t> identity_ids(std::span<const int32_t> ids,
                                  std::span<const PromptImage> images);

}  // namespace cedar
