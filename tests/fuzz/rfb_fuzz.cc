// Fuzz target for the viewer-side RFB parser (controller/desktop/rfb_parser.h), the first code
// that reads a viewer's bytes. Each input is parsed twice, whole and cut into reads at offsets
// the input itself picks, and the invariants the bridge relies on are checked:
//  - both ways give the same messages and the same verdict (a split changes nothing);
//  - a message is never empty, and never longer than a ClientCutText at its limit;
//  - messages that were not rewritten are exactly the bytes they came from, in order;
//  - after an error nothing more comes out;
//  - after each read the parser holds less than one whole message.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "controller/desktop/rfb_parser.h"

namespace {

using berth::desktop::RfbClientParser;
using berth::desktop::RfbMessage;

void Check(bool ok) {
  if (!ok) std::abort();
}

struct Outcome {
  std::vector<RfbMessage> messages;
  bool failed = false;
};

Outcome Run(std::string_view input, const std::vector<size_t>& cuts) {
  RfbClientParser parser;
  Outcome out;
  size_t at = 0;
  size_t consumed = 0;
  auto drain = [&] {
    for (;;) {
      auto m = parser.Next();
      if (!m) {
        out.failed = true;
        Check(!parser.Next());  // stays failed
        return;
      }
      if (!*m) return;
      Check(!(*m)->bytes.empty());
      Check((*m)->bytes.size() <= 8 + berth::desktop::kMaxCutText);
      if (!(*m)->rewritten) Check(input.substr(consumed, (*m)->received) == (*m)->bytes);
      consumed += (*m)->received;
      out.messages.push_back(std::move(**m));
    }
  };
  for (size_t cut : cuts) {
    if (out.failed) break;
    size_t end = std::min(input.size(), cut);
    if (end <= at) continue;
    parser.Feed(input.substr(at, end - at));
    at = end;
    drain();
    // Whatever is held is less than one whole message: a whole one would have come out.
    if (!out.failed) Check(parser.buffered() < 8 + berth::desktop::kMaxCutText);
  }
  if (!out.failed && at < input.size()) {
    parser.Feed(input.substr(at));
    drain();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4 * 1024 * 1024) return 0;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  Outcome whole = Run(input, {input.size()});
  // Cuts picked by the input's own bytes: every 1 + (byte % 13) bytes.
  std::vector<size_t> cuts;
  for (size_t at = 0; at < input.size();) {
    at += 1 + static_cast<uint8_t>(input[at]) % 13;
    cuts.push_back(at);
  }
  Outcome split = Run(input, cuts);
  Check(whole.failed == split.failed);
  Check(whole.messages.size() == split.messages.size());
  for (size_t i = 0; i < whole.messages.size(); ++i) {
    Check(whole.messages[i].bytes == split.messages[i].bytes);
    Check(whole.messages[i].type == split.messages[i].type);
    Check(whole.messages[i].input == split.messages[i].input);
  }
  return 0;
}
