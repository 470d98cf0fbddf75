#include "controller/desktop/screen_image.h"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <jpeglib.h>
#include <libdeflate.h>

namespace berth::desktop {
namespace {

// PNG by hand on libdeflate: the signature, IHDR, one IDAT and IEND. Every row carries the Sub
// filter (each byte less the one a pixel before), which turns flat areas and text into runs
// zlib-style compression takes quickly, and libdeflate's fastest level compresses the whole
// image in one call: about 2.4x faster than libpng and zlib at their fastest on a screen of
// text, for a PNG about 20% larger (BENCHMARKS.md, "The desktop").
void AppendBe32(std::string& out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  out.append(b, 4);
}

void AppendChunk(std::string& out, const char (&type)[5], const void* data, size_t size) {
  AppendBe32(out, static_cast<uint32_t>(size));
  size_t at = out.size();
  out.append(type, 4);
  if (size > 0) out.append(static_cast<const char*>(data), size);
  AppendBe32(out, libdeflate_crc32(0, out.data() + at, size + 4));
}

Result<std::string> EncodePng(const Frame& frame) {
  const size_t stride = static_cast<size_t>(frame.size.width) * 3;
  const size_t rows = static_cast<size_t>(frame.size.height);
  std::vector<uint8_t> filtered((stride + 1) * rows);
  const auto* in = reinterpret_cast<const uint8_t*>(frame.rgb.data());
  for (size_t y = 0; y < rows; ++y) {
    uint8_t* dst = filtered.data() + y * (stride + 1);
    const uint8_t* src = in + y * stride;
    dst[0] = 1;  // Sub
    std::copy_n(src, std::min<size_t>(3, stride), dst + 1);
    for (size_t i = 3; i < stride; ++i) dst[1 + i] = static_cast<uint8_t>(src[i] - src[i - 3]);
  }
  std::unique_ptr<libdeflate_compressor, decltype(&libdeflate_free_compressor)> compressor(
      libdeflate_alloc_compressor(1), &libdeflate_free_compressor);
  if (!compressor) return Fail(ErrorCode::kInternal, "png: out of memory for the compressor");
  std::vector<uint8_t> zlib(libdeflate_zlib_compress_bound(compressor.get(), filtered.size()));
  size_t zlib_size = libdeflate_zlib_compress(compressor.get(), filtered.data(), filtered.size(), zlib.data(), zlib.size());
  if (zlib_size == 0) return Fail(ErrorCode::kInternal, "png: the compressor failed");

  std::string out;
  out.reserve(zlib_size + 64);
  out.append("\x89PNG\r\n\x1a\n", 8);
  uint8_t ihdr[13] = {};
  for (int i = 0; i < 4; ++i) {
    ihdr[i] = static_cast<uint8_t>(static_cast<uint32_t>(frame.size.width) >> (24 - 8 * i));
    ihdr[4 + i] = static_cast<uint8_t>(static_cast<uint32_t>(frame.size.height) >> (24 - 8 * i));
  }
  ihdr[8] = 8;  // bits per sample
  ihdr[9] = 2;  // truecolour (RGB); compression, filter method and interlace are all 0
  AppendChunk(out, "IHDR", ihdr, sizeof ihdr);
  AppendChunk(out, "IDAT", zlib.data(), zlib_size);
  AppendChunk(out, "IEND", nullptr, 0);
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
