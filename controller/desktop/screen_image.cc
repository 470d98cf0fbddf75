#include "controller/desktop/screen_image.h"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdlib>
#include <cstdio>
#include <vector>

#include <fmt/format.h>
#include <jpeglib.h>
#include <png.h>

namespace berth::desktop {
namespace {

// libpng reports errors through a longjmp to the png_struct's jump buffer (png_jmpbuf); the
// compression runs in a function of its own with only trivially destructible locals, as the
// JPEG one below. Fast settings for a screen: zlib's fastest level and the Sub filter, which
// flat areas and text compress well with (about 3x faster than libpng's defaults here, for a
// PNG a little larger), in one pass into a growing buffer.
void PngWrite(png_structp png, png_bytep data, size_t length) {
  auto* out = static_cast<std::string*>(png_get_io_ptr(png));
  out->append(reinterpret_cast<const char*>(data), length);
}

void PngFlush(png_structp) {}

bool CompressPng(const Frame& frame, std::string* out) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png)) != 0) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, out, PngWrite, PngFlush);
  png_set_IHDR(png, info, static_cast<png_uint_32>(frame.size.width), static_cast<png_uint_32>(frame.size.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 1);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
  png_write_info(png, info);
  for (int y = 0; y < frame.size.height; ++y) {
    auto* row = reinterpret_cast<png_bytep>(const_cast<char*>(frame.rgb.data()) +
                                            static_cast<size_t>(y) * frame.size.width * 3);
    png_write_row(png, row);
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

Result<std::string> EncodePng(const Frame& frame) {
  std::string out;
  out.reserve(static_cast<size_t>(frame.size.width) * frame.size.height / 4 + 1024);
  if (!CompressPng(frame, &out)) return Fail(ErrorCode::kInternal, "png: the encoder failed");
  return out;
}

// libjpeg reports errors through error_exit, whose default ends the process: this one jumps
// back instead (classic libjpeg usage). Nothing with a destructor lives between setjmp and
// the calls that may jump.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
};

[[noreturn]] void JpegErrorExit(j_common_ptr cinfo) {
  std::longjmp(reinterpret_cast<JpegError*>(cinfo->err)->jump, 1);
}

// The compression itself, in a function of its own with only trivially destructible locals.
bool CompressJpeg(const Frame& frame, int quality, unsigned char** buffer, unsigned long* size) {
  jpeg_compress_struct cinfo{};
  JpegError err{};
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegErrorExit;
  if (setjmp(err.jump) != 0) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, buffer, size);
  cinfo.image_width = static_cast<JDIMENSION>(frame.size.width);
  cinfo.image_height = static_cast<JDIMENSION>(frame.size.height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    auto* row = reinterpret_cast<JSAMPROW>(const_cast<char*>(frame.rgb.data()) +
                                           static_cast<size_t>(cinfo.next_scanline) * frame.size.width * 3);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

Result<std::string> EncodeJpeg(const Frame& frame, int quality) {
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  bool ok = CompressJpeg(frame, quality, &buffer, &size);
  std::string out;
  if (ok) out.assign(reinterpret_cast<char*>(buffer), size);
  std::free(buffer);
  if (!ok) return Fail(ErrorCode::kInternal, "jpeg: the encoder failed");
  return out;
}

}  // namespace

Result<ImageFormat> ParseImageFormat(std::string_view name) {
  if (name == "png") return ImageFormat::kPng;
  if (name == "jpeg" || name == "jpg") return ImageFormat::kJpeg;
  return Fail(ErrorCode::kInvalidArgument, fmt::format("format '{}': png or jpeg", name));
}

std::string_view ImageMime(ImageFormat format) { return format == ImageFormat::kPng ? "image/png" : "image/jpeg"; }

Frame ScaleFrame(const Frame& frame, double scale) {
  if (scale >= 1.0) return frame;
  const int sw = frame.size.width;
  const int sh = frame.size.height;
  Frame out;
  out.size.width = std::max(1, static_cast<int>(std::lround(sw * scale)));
  out.size.height = std::max(1, static_cast<int>(std::lround(sh * scale)));
  out.rgb.assign(static_cast<size_t>(out.size.width) * out.size.height * 3, '\0');
  // Each output pixel averages the source pixels whose centres fall in its box (at least one).
  std::vector<int> x0(out.size.width), x1(out.size.width);
  for (int x = 0; x < out.size.width; ++x) {
    x0[x] = static_cast<int>(static_cast<int64_t>(x) * sw / out.size.width);
    x1[x] = std::max(x0[x] + 1, static_cast<int>(static_cast<int64_t>(x + 1) * sw / out.size.width));
  }
  const auto* src = reinterpret_cast<const uint8_t*>(frame.rgb.data());
  auto* dst = reinterpret_cast<uint8_t*>(out.rgb.data());
  std::vector<uint32_t> sums(static_cast<size_t>(out.size.width) * 3);
  for (int y = 0; y < out.size.height; ++y) {
    int y0 = static_cast<int>(static_cast<int64_t>(y) * sh / out.size.height);
    int y1 = std::max(y0 + 1, static_cast<int>(static_cast<int64_t>(y + 1) * sh / out.size.height));
    std::fill(sums.begin(), sums.end(), 0);
    for (int sy = y0; sy < y1; ++sy) {
      const uint8_t* line = src + static_cast<size_t>(sy) * sw * 3;
      for (int x = 0; x < out.size.width; ++x) {
        for (int sx = x0[x]; sx < x1[x]; ++sx) {
          sums[x * 3] += line[sx * 3];
          sums[x * 3 + 1] += line[sx * 3 + 1];
          sums[x * 3 + 2] += line[sx * 3 + 2];
        }
      }
    }
    for (int x = 0; x < out.size.width; ++x) {
      uint32_t n = static_cast<uint32_t>((y1 - y0) * (x1[x] - x0[x]));
      uint8_t* d = dst + (static_cast<size_t>(y) * out.size.width + x) * 3;
      for (int c = 0; c < 3; ++c) d[c] = static_cast<uint8_t>((sums[x * 3 + c] + n / 2) / n);
    }
  }
  return out;
}

Result<std::string> EncodeFrame(const Frame& frame, ImageFormat format, int jpeg_quality) {
  if (frame.size.width < 1 || frame.size.height < 1 ||
      frame.rgb.size() != static_cast<size_t>(frame.size.width) * frame.size.height * 3) {
    return Fail(ErrorCode::kInternal, "an empty or malformed frame");
  }
  if (format == ImageFormat::kPng) return EncodePng(frame);
  return EncodeJpeg(frame, std::clamp(jpeg_quality, 1, 100));
}

}  // namespace berth::desktop
