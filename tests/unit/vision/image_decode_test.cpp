#include "vision/image_decode.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using namespace cedar::vision;

std::vector<uint8_t> corpus(const std::string& name) {
  std::ifstream f(std::string(CEDAR_SOURCE_DIR) + "/tests/fuzz/corpus/image/" + name,
                  std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

TEST(ImageDecode, SniffsAndDecodesEveryFormat) {
  for (const auto& [name, fmt] :
       std::vector<std::pair<std::string, ImageFormat>>{{"rgb.png", ImageFormat::kPng},
                                                        {"pal.png", ImageFormat::kPng},
                                                        {"rgb.jpg", ImageFormat::kJpeg},
                                                        {"prog.jpg", ImageFormat::kJpeg},
                                                        {"lossy.webp", ImageFormat::kWebp},
                                                        {"lossless.webp", ImageFormat::kWebp},
                                                        {"still.gif", ImageFormat::kGif},
                                                        {"inter.gif", ImageFormat::kGif}}) {
    const auto b = corpus(name);
    ASSERT_FALSE(b.empty()) << name;
    EXPECT_EQ(sniff_image_format(b), fmt) << name;
    const RgbImage img = decode_image(b);
    EXPECT_EQ(img.width, 8) << name;
    EXPECT_EQ(img.height, 8) << name;
    EXPECT_EQ(img.rgb.size(), 8u * 8u * 3u);
  }
}

TEST(ImageDecode, RefusesTruncatedUnknownAndOversizedImages) {
  for (const char* name : {"rgb.png", "rgb.jpg", "lossy.webp", "still.gif"}) {
    auto b = corpus(name);
    b.resize(b.size() / 2);
    EXPECT_THROW(decode_image(b), ImageError) << name;
  }
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_THROW(decode_image(text), ImageError);
  EXPECT_THROW(decode_image({}), ImageError);
  ImageLimits tiny;
  tiny.max_pixels = 63;  // an 8x8 image has 64
  try {
    decode_image(corpus("rgb.png"), tiny);
    ADD_FAILURE() << "an image over the pixel limit was decoded";
  } catch (const ImageError& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the limit"), std::string::npos) << e.what();
  }
  ImageLimits small_file;
  small_file.max_bytes = 10;
  EXPECT_THROW(decode_image(corpus("rgb.jpg"), small_file), ImageError);
}

}  // namespace
