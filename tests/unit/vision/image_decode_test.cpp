#include "vision/image_decode.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "vision/image_processor.h"

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

// A GIF whose logical screen is w x h around a 1x1 frame (35 bytes; tests/server/image_files.mjs
// makes the same for the server tests).
std::vector<uint8_t> gif_bomb(int w, int h) {
  std::vector<uint8_t> b = {'G', 'I', 'F', '8', '9', 'a'};
  auto u16 = [&](int v) {
    b.push_back(uint8_t(v & 0xff));
    b.push_back(uint8_t(v >> 8));
  };
  u16(w);
  u16(h);
  b.insert(b.end(), {0x80, 0, 0, 0, 0, 0, 255, 255, 255, 0x2c});
  u16(0);
  u16(0);
  u16(1);
  u16(1);
  b.insert(b.end(), {0, 2, 2, 0x44, 0x01, 0, 0x3b});
  return b;
}

TEST(ImageDecode, ProbeReadsTheHeaderDecodeWillSee) {
  for (const char* name : {"rgb.png", "pal.png", "rgb.jpg", "prog.jpg", "grey.jpg", "lossy.webp",
                           "lossless.webp", "still.gif", "inter.gif"}) {
    const auto b = corpus(name);
    const ImageInfo info = probe_image(b);
    const RgbImage img = decode_image(b);
    EXPECT_EQ(info.format, sniff_image_format(b)) << name;
    EXPECT_EQ(info.width, img.width) << name;
    EXPECT_EQ(info.height, img.height) << name;
    EXPECT_GE(info.decode_pixels, int64_t(img.width) * img.height) << name;
  }
  // what the decoders hold beside the RGB: a progressive JPEG's coefficients (2 bytes per
  // sample, 3 components: twice the RGB), a GIF's index plane
  EXPECT_GE(probe_image(corpus("prog.jpg")).decode_pixels, 3 * 64);
  EXPECT_EQ(probe_image(corpus("rgb.jpg")).decode_pixels, 64);
  EXPECT_EQ(probe_image(corpus("still.gif")).decode_pixels, (64 * 4 + 2) / 3);
  // a bad header is refused by the probe as by the decoder
  auto cut = corpus("rgb.jpg");
  cut.resize(20);
  EXPECT_THROW(probe_image(cut), ImageError);
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_THROW(probe_image(text), ImageError);
}

// The 43-byte-bomb class: the declared size is what counts, and it is refused from the header
// (the probe allocates nothing of it; the decoder refuses before its buffers).
TEST(ImageDecode, DeclaredSizeIsCheckedFromTheHeader) {
  const auto bomb = gif_bomb(8192, 8192);
  const ImageInfo info = probe_image(bomb);
  EXPECT_EQ(info.width, 8192);
  EXPECT_EQ(info.decode_pixels, (int64_t(8192) * 8192 * 4 + 2) / 3);
  ImageLimits small;
  small.max_pixels = int64_t(1) << 20;
  for (auto* f : {+[](std::span<const uint8_t> b, const ImageLimits&l) { probe_image(b, l); },
                  +[](std::span<const uint8_t> b, const ImageLimits&l) { decode_image(b, l); }}) {
    try {
      f(bomb, small);
      ADD_FAILURE() << "an 8192x8192 GIF passed a 1 Mpx limit";
    } catch (const ImageError& e) {
      EXPECT_NE(std::string(e.what()).find("8192x8192 pixels exceed the limit"), std::string::npos)
          << e.what();
    }
  }
  const RgbImage small_bomb = decode_image(gif_bomb(300, 200));  // the format itself is fine
  EXPECT_EQ(small_bomb.width, 300);
}

// The interrupt is polled as rows (and JPEG scans) are decoded: a decode stops within a row of
// the moment it asks, with its message.
TEST(ImageDecode, InterruptStopsTheDecodeWithItsMessage) {
  for (const char* name :
       {"rgb.png", "pal.png", "rgb.jpg", "prog.jpg", "still.gif", "inter.gif", "lossy.webp"}) {
    int calls = 0;
    ImageLimits lim;
    const int stop_at = std::string(name).ends_with(".webp") ? 1 : 3;  // WebP: before it starts
    lim.interrupt = [&]() -> const char* { return ++calls >= stop_at ? "stop here" : nullptr; };
    try {
      decode_image(corpus(name), lim);
      ADD_FAILURE() << name << " decoded through an interrupt";
    } catch (const ImageError& e) {
      EXPECT_NE(std::string(e.what()).find("stop here"), std::string::npos) << e.what();
    }
    EXPECT_EQ(calls, stop_at) << name;
    int polled = 0;  // a decode that is never asked to stop polls once a row or more
    lim.interrupt = [&]() -> const char* { return ++polled, nullptr; };
    EXPECT_EQ(decode_image(corpus(name), lim).width, 8) << name;
    EXPECT_GE(polled, stop_at == 1 ? 1 : 8) << name;
  }
}

// scans.jpg: a 16x16 progressive JPEG of 150 scans (the same band again and again, which libjpeg
// accepts): over the scan cap, each scan being a pass over the image.
TEST(ImageDecode, JpegScansAreCapped) {
  const auto b = corpus("scans.jpg");
  ASSERT_FALSE(b.empty());
  try {
    decode_image(b);
    ADD_FAILURE() << "150 scans decoded under a cap of 100";
  } catch (const ImageError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 100 scans"), std::string::npos) << e.what();
  }
  ImageLimits more;
  more.max_scans = 150;
  const RgbImage img = decode_image(b, more);
  EXPECT_EQ(img.width, 16);
  EXPECT_EQ(img.rgb[0], img.rgb[3 * 255]);  // flat grey
}

// A 1x1 RGB PNG carrying `chunks` zTXt chunks that each inflate to `mib` MiB.
std::vector<uint8_t> png_with_text(int chunks, int mib) {
  std::vector<uint8_t> z(1 << 20);  // deflate of mib MiB of one byte value: ~1 KiB per MiB
  z_stream zs{};
  EXPECT_EQ(deflateInit(&zs, 9), Z_OK);
  const std::vector<uint8_t> block(1 << 20, 'a');
  zs.next_out = z.data();
  zs.avail_out = uInt(z.size());
  for (int i = 0; i < mib; ++i) {
    zs.next_in = const_cast<Bytef*>(block.data());
    zs.avail_in = uInt(block.size());
    EXPECT_EQ(deflate(&zs, i + 1 == mib ? Z_FINISH : Z_NO_FLUSH),
              i + 1 == mib ? Z_STREAM_END : Z_OK);
  }
  z.resize(zs.total_out);
  deflateEnd(&zs);
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto chunk = [&](const char* type, const std::vector<uint8_t>& data) {
    const uint32_t n = uint32_t(data.size());
    for (int s = 24; s >= 0; s -= 8) png.push_back(uint8_t(n >> s));
    const size_t start = png.size();
    png.insert(png.end(), type, type + 4);
    png.insert(png.end(), data.begin(), data.end());
    const uint32_t crc = uint32_t(crc32(0, png.data() + start, uInt(png.size() - start)));
    for (int s = 24; s >= 0; s -= 8) png.push_back(uint8_t(crc >> s));
  };
  chunk("IHDR", {0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0});
  for (int i = 0; i < chunks; ++i) {
    std::vector<uint8_t> text(4 + z.size());  // keyword, NUL, method 0, the deflated text
    text[0] = 'k';
    text[1] = uint8_t('a' + i);
    std::copy(z.begin(), z.end(), text.begin() + 4);
    chunk("zTXt", text);
  }
  std::vector<uint8_t> idat(64);
  uLongf len = idat.size();
  const uint8_t row[4] = {0, 10, 20, 30};  // filter byte, one RGB pixel
  EXPECT_EQ(compress(idat.data(), &len, row, sizeof row), Z_OK);
  idat.resize(len);
  chunk("IDAT", idat);
  chunk("IEND", {});
  return png;
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// Text chunks (and profiles) are skipped unread: libpng inflated each compressed one and kept
// it, so that a 2 MB PNG of 40 zTXt chunks held 2.5 GB outside any pixel count.
TEST(ImageDecode, PngTextChunksAreNotInflated) {
  const auto png = png_with_text(8, 48);  // 384 MiB of text in ~400 KB
  const long before = peak_rss_kib();
  EXPECT_EQ(probe_image(png).width, 1);
  const RgbImage img = decode_image(png);
  ASSERT_EQ(img.width, 1);
  EXPECT_EQ(img.rgb[2], 30);
  EXPECT_LT(peak_rss_kib() - before, 48 * 1024) << "the text was inflated";
}

// The patches' pixels, as budgeted from the plan before the image is decoded.
TEST(ImageDecode, PatchPixelsAreKnownFromThePlan) {
  const ImagePlan p = plan_image(1200, 900);
  const ImagePatches patches = preprocess_image(decode_image(gif_bomb(1200, 900)));
  EXPECT_EQ(patches.plan.best_width, p.best_width);
  EXPECT_EQ(int64_t(patches.bf16.size()) * 2, patch_pixels(p) * 3);  // bytes
  EXPECT_GT(preprocess_pixels(p), int64_t(p.best_width) * 900);      // the horizontal pass
}

}  // namespace
