// Text escaped for XML and HTML (element content and quoted attribute values): libvirt's
// domain XML, berthd's own pages. Pure.
#pragma once

#include <string>
#include <string_view>

namespace berth {

inline std::string EscapeMarkup(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&apos;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace berth
