#include "vision/image_decode.h"

#include <gif_lib.h>
#include <jerror.h>  // after jpeglib.h, whose types it uses
#include <jpeglib.h>
#include <png.h>
#include <webp/decode.h>
#include <webp/demux.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

namespace cedar::vision {

namespace {

// The dimensions a header announces, before any pixel buffer exists.
void check_size(const char* fmt, int64_t w, int64_t h, const ImageLimits& lim) {
  if (w <= 0 || h <= 0)
    throw ImageError(std::string(fmt) + ": the image has no pixels (" + std::to_string(w) + "x" +
                     std::to_string(h) + ")");
  if (w > lim.max_side || h > lim.max_side || w * h > lim.max_pixels)
    throw ImageError(std::string(fmt) + ": " + std::to_string(w) + "x" + std::to_string(h) +
                     " pixels exceed the limit (" + std::to_string(lim.max_side) + " a side, " +
                     std::to_string(lim.max_pixels) + " in all)");
}

// `pixels` of `bytes_per_pixel` bytes, counted in RGB pixels (3 bytes), rounded up.
int64_t rgb_pixels(int64_t pixels, int bytes_per_pixel) {
  return (pixels * bytes_per_pixel + 2) / 3;
}

// The message of the caller's interrupt, if it asks to stop.
const char* interrupted(const ImageLimits& lim) {
  return lim.interrupt ? lim.interrupt() : nullptr;
}

// --- PNG (libpng; its errors longjmp back to the setjmp in decode_png) --------------------------

struct PngReader {
  std::span<const uint8_t> bytes;
  const ImageLimits* lim = nullptr;
  size_t at = 0;
  char error[200] = {};
};

void png_on_error(png_structp png, png_const_charp msg) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(r->error, sizeof r->error, "%s", msg);
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}

// After each row (of each pass of an interlaced image).
void png_on_row(png_structp png, png_uint_32, int) {
  if (const char* why = interrupted(*static_cast<PngReader*>(png_get_io_ptr(png))->lim))
    png_error(png, why);
}

void png_read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (r->bytes.size() - r->at < n) png_error(png, "the file is truncated");
  std::memcpy(out, r->bytes.data() + r->at, n);
  r->at += n;
}

// header != null: fills it once the header is read and checked, and returns no pixels.
RgbImage decode_png(std::span<const uint8_t> bytes, const ImageLimits& lim, ImageInfo* header) {
  PngReader reader{bytes, &lim};
  RgbImage out;
  std::vector<uint8_t> wide;  // 16-bit grey: read whole, then cut as PIL does
  std::vector<png_bytep> rows;
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, png_on_error, png_on_warning);
  if (!png) throw ImageError("png: out of memory");
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw ImageError(std::string("png: ") + (reader.error[0] ? reader.error : "out of memory"));
  }
  png_set_read_fn(png, &reader, png_read_bytes);
  png_set_user_limits(png, png_uint_32(lim.max_side), png_uint_32(lim.max_side));
  png_set_chunk_malloc_max(png, png_alloc_size_t(lim.max_bytes));
  // Text, colour profiles and the like are skipped unread (the pixels are taken as they are,
  // as PIL's convert("RGB") takes them): libpng would inflate each compressed one, up to the
  // chunk limit, and keep the text -- a 2 MB file of 40 zTXt chunks held 2.5 GB.
  static constexpr png_byte kSkipped[] = "tEXt\0zTXt\0iTXt\0iCCP\0sPLT\0eXIf";
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, kSkipped, 6);
  png_read_info(png, info);
  const int64_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  const int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  if (w <= 0 || h <= 0 || w > lim.max_side || h > lim.max_side || w * h > lim.max_pixels) {
    png_destroy_read_struct(&png, &info, nullptr);
    check_size("png", w, h, lim);
  }
  // PIL reads 16-bit grey as "I;16" and clips it to 0..255 on the way to RGB; every other
  // 16-bit layout keeps the high byte of each sample.
  const bool grey16 = depth == 16 && type == PNG_COLOR_TYPE_GRAY;
  if (header) {
    *header = {ImageFormat::kPng, int(w), int(h), rgb_pixels(w * h, grey16 ? 5 : 3)};
    png_destroy_read_struct(&png, &info, nullptr);
    return out;
  }
  png_set_read_status_fn(png, png_on_row);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16 && !grey16) png_set_strip_16(png);
  if (type == PNG_COLOR_TYPE_GRAY_ALPHA || (type == PNG_COLOR_TYPE_GRAY && !grey16))
    png_set_gray_to_rgb(png);
  if (type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const size_t stride = png_get_rowbytes(png, info);
  if (stride != size_t(w) * (grey16 ? 2 : 3))
    png_error(png, "unexpected row layout after the transforms");
  out = RgbImage(int(w), int(h));
  if (grey16) wide.resize(stride * size_t(h));
  rows.resize(size_t(h));
  for (int64_t y = 0; y < h; ++y)
    rows[size_t(y)] = grey16 ? wide.data() + size_t(y) * stride : out.row(int(y));
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  if (grey16)
    for (size_t i = 0; i < size_t(w) * size_t(h); ++i) {
      const int v = (wide[2 * i] << 8) | wide[2 * i + 1];
      std::memset(&out.rgb[3 * i], std::min(v, 255), 3);
    }
  return out;
}

// --- JPEG (libjpeg-turbo; errors longjmp back to decode_jpeg) ------------------------------------

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char error[JMSG_LENGTH_MAX] = {};
};

void jpeg_on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  c->err->format_message(c, e->error);
  longjmp(e->jump, 1);
}

// Warnings are ignored as PIL ignores them, except the end of the data: libjpeg would pad a
// truncated file with grey where PIL refuses it ("image file is truncated").
void jpeg_on_message(j_common_ptr c, int level) {
  if (level == -1 && c->err->msg_code == JWRN_JPEG_EOF) {
    auto* e = reinterpret_cast<JpegError*>(c->err);
    std::snprintf(e->error, sizeof e->error, "the file is truncated");
    longjmp(e->jump, 1);
  }
}

// Called as the scans are read (each iMCU row of each) and for each output row: stops a file of
// too many scans, or when the caller's interrupt asks.
struct JpegProgress {
  jpeg_progress_mgr mgr;
  const ImageLimits* lim;
};

void jpeg_on_progress(j_common_ptr c) {
  const auto* p = reinterpret_cast<const JpegProgress*>(c->progress);
  auto* e = reinterpret_cast<JpegError*>(c->err);
  const int scans = reinterpret_cast<j_decompress_ptr>(c)->input_scan_number;
  if (scans > p->lim->max_scans) {
    std::snprintf(e->error, sizeof e->error, "the file has more than %d scans", p->lim->max_scans);
    longjmp(e->jump, 1);
  }
  if (const char* why = interrupted(*p->lim)) {
    std::snprintf(e->error, sizeof e->error, "%s", why);
    longjmp(e->jump, 1);
  }
}

// A multi-scan (progressive) file is read whole into coefficient arrays before any row comes
// out: 64 coefficients of 2 bytes per 8x8 block of each component, at its sampling.
int64_t jpeg_coefficient_bytes(const jpeg_decompress_struct& c) {
  int max_h = 1, max_v = 1;
  for (int i = 0; i < c.num_components; ++i) {
    max_h = std::max(max_h, c.comp_info[i].h_samp_factor);
    max_v = std::max(max_v, c.comp_info[i].v_samp_factor);
  }
  auto blocks = [](int64_t px, int samp, int max_samp) {
    const int64_t b = (px * samp + int64_t(max_samp) * 8 - 1) / (int64_t(max_samp) * 8);
    return (b + samp - 1) / samp * samp;  // whole MCUs
  };
  int64_t bytes = 0;
  for (int i = 0; i < c.num_components; ++i) {
    const jpeg_component_info& ci = c.comp_info[i];
    bytes += blocks(c.image_width, std::max(1, ci.h_samp_factor), max_h) *
             blocks(c.image_height, std::max(1, ci.v_samp_factor), max_v) * 128;
  }
  return bytes;
}

RgbImage decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& lim, ImageInfo* header) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  JpegProgress progress{{jpeg_on_progress, 0, 0, 0, 0}, &lim};
  RgbImage out;
  std::string refusal;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.emit_message = jpeg_on_message;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    throw ImageError(std::string("jpeg: ") + err.error);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  const int64_t w = cinfo.image_width, h = cinfo.image_height;
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK)
    refusal = "jpeg: CMYK images are not supported";
  else if (w <= 0 || h <= 0 || w > lim.max_side || h > lim.max_side || w * h > lim.max_pixels)
    refusal = "size";
  if (!refusal.empty()) {
    jpeg_destroy_decompress(&cinfo);
    if (refusal == "size") check_size("jpeg", w, h, lim);
    throw ImageError(refusal);
  }
  if (header) {
    const int64_t coef = jpeg_has_multiple_scans(&cinfo) ? jpeg_coefficient_bytes(cinfo) : 0;
    *header = {ImageFormat::kJpeg, int(w), int(h), w * h + (coef + 2) / 3};
    jpeg_destroy_decompress(&cinfo);
    return out;
  }
  cinfo.progress = &progress.mgr;
  cinfo.out_color_space = JCS_RGB;
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_components != 3) {
    std::snprintf(err.error, sizeof err.error, "unexpected %d output components",
                  cinfo.output_components);
    longjmp(err.jump, 1);
  }
  out = RgbImage(int(w), int(h));
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.row(int(cinfo.output_scanline));
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return out;
}

// --- WebP (libwebp; an animation gives its first frame) ------------------------------------------

RgbImage decode_webp(std::span<const uint8_t> bytes, const ImageLimits& lim, ImageInfo* header) {
  WebPBitstreamFeatures f;
  if (WebPGetFeatures(bytes.data(), bytes.size(), &f) != VP8_STATUS_OK)
    throw ImageError("webp: not a valid WebP file");
  check_size("webp", f.width, f.height, lim);
  if (header) {
    // lossy: straight into our buffer; lossless or with alpha: an ARGB plane (4 bytes) first;
    // an animation: two RGBA canvases and the frame's ARGB plane
    const int64_t px = int64_t(f.width) * f.height;
    const bool plane = f.format != 1 || f.has_alpha;
    *header = {ImageFormat::kWebp, f.width, f.height,
               rgb_pixels(px, f.has_animation ? 3 + 8 + 4
                              : plane         ? 3 + 4
                                              : 3)};
    return {};
  }
  if (const char* why = interrupted(lim)) throw ImageError(std::string("webp: ") + why);
  RgbImage out(f.width, f.height);
  if (!f.has_animation) {
    const int stride = f.width * 3;
    if (!WebPDecodeRGBInto(bytes.data(), bytes.size(), out.rgb.data(), out.rgb.size(), stride))
      throw ImageError("webp: the image data is corrupt or truncated");
    return out;
  }
  WebPData data{bytes.data(), bytes.size()};
  WebPAnimDecoderOptions opt;
  if (!WebPAnimDecoderOptionsInit(&opt)) throw ImageError("webp: decoder version mismatch");
  opt.color_mode = MODE_RGBA;
  WebPAnimDecoder* dec = WebPAnimDecoderNew(&data, &opt);
  if (!dec) throw ImageError("webp: not a valid animated WebP file");
  WebPAnimInfo info;
  uint8_t* frame = nullptr;
  int ts = 0;
  const bool ok = WebPAnimDecoderGetInfo(dec, &info) && int(info.canvas_width) == f.width &&
                  int(info.canvas_height) == f.height && WebPAnimDecoderGetNext(dec, &frame, &ts) &&
                  frame;
  if (ok)
    for (size_t i = 0; i < size_t(f.width) * size_t(f.height); ++i)
      std::memcpy(&out.rgb[3 * i], frame + 4 * i, 3);
  WebPAnimDecoderDelete(dec);
  if (!ok) throw ImageError("webp: the first frame is corrupt or truncated");
  return out;
}

// --- GIF (giflib; the first image of the file) ---------------------------------------------------

struct GifReader {
  std::span<const uint8_t> bytes;
  size_t at = 0;
};

int gif_read_bytes(GifFileType* gif, GifByteType* out, int n) {
  auto* r = static_cast<GifReader*>(gif->UserData);
  const size_t k = std::min(size_t(std::max(0, n)), r->bytes.size() - r->at);
  std::memcpy(out, r->bytes.data() + r->at, k);
  r->at += k;
  return int(k);
}

struct GifCloser {
  GifFileType* gif;
  ~GifCloser() {
    int e = 0;
    if (gif) DGifCloseFile(gif, &e);
  }
};

RgbImage decode_gif(std::span<const uint8_t> bytes, const ImageLimits& lim, ImageInfo* header) {
  GifReader reader{bytes};
  int err = 0;
  GifCloser g{DGifOpen(&reader, gif_read_bytes, &err)};
  if (!g.gif) throw ImageError(std::string("gif: ") + GifErrorString(err));
  GifFileType* gif = g.gif;
  auto fail = [&](const char* what) -> ImageError {
    const char* detail = GifErrorString(gif->Error);
    return ImageError(std::string("gif: ") + what + (detail ? std::string(": ") + detail : ""));
  };
  check_size("gif", gif->SWidth, gif->SHeight, lim);
  if (header) {  // the screen's index plane (1 byte a pixel), then its RGB
    *header = {ImageFormat::kGif, gif->SWidth, gif->SHeight,
               rgb_pixels(int64_t(gif->SWidth) * gif->SHeight, 1 + 3)};
    return {};
  }
  int transparent = -1;
  for (;;) {
    GifRecordType rec;
    if (DGifGetRecordType(gif, &rec) == GIF_ERROR) throw fail("the file is corrupt or truncated");
    if (rec == TERMINATE_RECORD_TYPE) throw ImageError("gif: the file holds no image");
    if (rec == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) throw fail("a corrupt extension");
      if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4 && (ext[1] & 1))
        transparent = ext[4];
      while (ext)
        if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) throw fail("a corrupt extension");
      continue;
    }
    if (rec != IMAGE_DESC_RECORD_TYPE) continue;
    if (DGifGetImageDesc(gif) == GIF_ERROR) throw fail("a corrupt image descriptor");
    const GifImageDesc& d = gif->Image;
    const ColorMapObject* cmap = d.ColorMap ? d.ColorMap : gif->SColorMap;
    if (!cmap) throw ImageError("gif: the image has no colour table");
    if (d.Left < 0 || d.Top < 0 || d.Width <= 0 || d.Height <= 0 ||
        int64_t(d.Left) + d.Width > gif->SWidth || int64_t(d.Top) + d.Height > gif->SHeight)
      throw ImageError("gif: the first frame lies outside the logical screen");
    // Outside the first frame: the transparent index, else the background colour (PIL fills
    // the screen the same way before it pastes the frame).
    std::vector<GifByteType> idx(
        size_t(gif->SWidth) * size_t(gif->SHeight),
        GifByteType(transparent >= 0 ? transparent : gif->SBackGroundColor));
    std::vector<int> order(size_t(d.Height));
    if (d.Interlace) {  // rows arrive in four passes: every 8th from 0, every 8th from 4, ...
      static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
      int k = 0;
      for (int pass = 0; pass < 4; ++pass)
        for (int y = kStart[pass]; y < d.Height; y += kStep[pass]) order[size_t(k++)] = y;
    } else {
      for (int y = 0; y < d.Height; ++y) order[size_t(y)] = y;
    }
    for (int y : order) {
      if (const char* why = interrupted(lim)) throw ImageError(std::string("gif: ") + why);
      GifByteType* line = idx.data() + size_t(d.Top + y) * size_t(gif->SWidth) + size_t(d.Left);
      if (DGifGetLine(gif, line, d.Width) == GIF_ERROR) throw fail("the image data is truncated");
    }
    RgbImage out(gif->SWidth, gif->SHeight);
    for (size_t i = 0; i < idx.size(); ++i) {
      const int c = idx[i];
      if (c < cmap->ColorCount) {
        out.rgb[3 * i] = cmap->Colors[c].Red;
        out.rgb[3 * i + 1] = cmap->Colors[c].Green;
        out.rgb[3 * i + 2] = cmap->Colors[c].Blue;
      }  // else black: PIL's palette is padded with zeros
    }
    return out;
  }
}

}  // namespace

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  auto starts = [&](const char* m, size_t n, size_t at = 0) {
    return b.size() >= at + n && std::memcmp(b.data() + at, m, n) == 0;
  };
  if (starts("\x89PNG\r\n\x1a\n", 8)) return ImageFormat::kPng;
  if (starts("\xff\xd8\xff", 3)) return ImageFormat::kJpeg;
  if (starts("RIFF", 4) && starts("WEBP", 4, 8)) return ImageFormat::kWebp;
  if (starts("GIF87a", 6) || starts("GIF89a", 6)) return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

const char* image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::kPng:
      return "png";
    case ImageFormat::kJpeg:
      return "jpeg";
    case ImageFormat::kWebp:
      return "webp";
    case ImageFormat::kGif:
      return "gif";
    case ImageFormat::kUnknown:
      break;
  }
  return "unknown";
}

namespace {

RgbImage decode_or_probe(std::span<const uint8_t> bytes, const ImageLimits& limits,
                         ImageInfo* header) {
  if (bytes.empty()) throw ImageError("image: no data");
  if (int64_t(bytes.size()) > limits.max_bytes)
    throw ImageError("image: " + std::to_string(bytes.size()) + " bytes exceed the limit of " +
                     std::to_string(limits.max_bytes));
  switch (sniff_image_format(bytes)) {
    case ImageFormat::kPng:
      return decode_png(bytes, limits, header);
    case ImageFormat::kJpeg:
      return decode_jpeg(bytes, limits, header);
    case ImageFormat::kWebp:
      return decode_webp(bytes, limits, header);
    case ImageFormat::kGif:
      return decode_gif(bytes, limits, header);
    case ImageFormat::kUnknown:
      break;
  }
  throw ImageError("image: not a PNG, JPEG, WebP or GIF file");
}

}  // namespace

ImageInfo probe_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  ImageInfo info;
  decode_or_probe(bytes, limits, &info);
  return info;
}

RgbImage decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  return decode_or_probe(bytes, limits, nullptr);
}

}  // namespace cedar::vision
