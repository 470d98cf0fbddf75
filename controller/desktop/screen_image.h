// A captured screen (rfb_client.h) as the image an agent asked for: scaled down (so a model's
// coordinates on the image map back by one factor) and encoded as PNG or JPEG. Pure; any
// thread.
#pragma once

#include <string>
#include <string_view>

#include "common/error.h"
#include "controller/desktop/rfb_client.h"

namespace berth::desktop {

enum class ImageFormat { kPng, kJpeg };
// "png" or "jpeg" (also "jpg"); invalid_argument otherwise.
Result<ImageFormat> ParseImageFormat(std::string_view name);
std::string_view ImageMime(ImageFormat format);

// `frame` scaled by `scale` (0 < scale <= 1; 1 is the frame itself), each pixel of the result
// the average of the pixels it covers. Each side is at least 1 pixel.
Frame ScaleFrame(const Frame& frame, double scale);

// The frame encoded; `jpeg_quality` 1-100 (JPEG only).
Result<std::string> EncodeFrame(const Frame& frame, ImageFormat format, int jpeg_quality = 80);

}  // namespace berth::desktop
