#include "controller/preview/preview_host.h"

#include <fmt/format.h>

namespace berth::preview {
namespace {

constexpr size_t kMaxLabel = 63;

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

Error Bad(std::string message) { return Error(ErrorCode::kInvalidArgument, std::move(message)); }

// A workspace id as NewId("ws") makes it, or a name as ValidateName allows it.
bool IsWorkspaceRef(std::string_view ws) {
  if (ws.empty()) return false;
  if (ws.starts_with("ws_")) {
    auto hex = ws.substr(3);
    if (hex.empty()) return false;
    for (char c : hex) {
      if (!IsDigit(c) && !(c >= 'a' && c <= 'f')) return false;
    }
    return true;
  }
  if (ws.front() == '-' || ws.back() == '-') return false;
  for (char c : ws) {
    if (!IsLower(c) && !IsDigit(c) && c != '-') return false;
  }
  return true;
}

}  // namespace

Result<std::optional<PreviewAddress>> ParsePreviewHost(std::string_view host, std::string_view domain) {
  // The listener's port, if any: digits only after the last ':' (a bracketed IPv6 literal is
  // never a preview host, and its ':' are left alone by the suffix test below).
  std::string_view name = host;
  if (auto colon = host.rfind(':'); colon != std::string_view::npos && host.find(']') == std::string_view::npos) {
    auto port = host.substr(colon + 1);
    name = host.substr(0, colon);
    bool digits = !port.empty() && port.size() <= 5;
    for (char c : port) digits = digits && IsDigit(c);
    if (!digits) {
      // Only a preview host's malformed port is this layer's business.
      std::string lowered = Lower(name);
      if (lowered.ends_with(fmt::format(".{}", domain))) return Fail(Bad("the Host header's port is not a number"));
      return std::optional<PreviewAddress>{};
    }
  }
  std::string lowered = Lower(name);
  // A trailing dot is the same DNS name, but not the same origin to a browser, and not the
  // name that was authorised: refused rather than normalised.
  std::string with_dot = fmt::format(".{}.", domain);
  if (lowered.ends_with(with_dot)) return Fail(Bad("a preview host has no trailing dot"));
  std::string suffix = fmt::format(".{}", domain);
  if (lowered == domain) return Fail(Bad("the preview domain itself names no preview: use {port}-{workspace}." + std::string(domain)));
  if (!lowered.ends_with(suffix)) return std::optional<PreviewAddress>{};
  std::string_view label = std::string_view(lowered).substr(0, lowered.size() - suffix.size());
  if (label.empty()) return Fail(Bad("a preview host needs {port}-{workspace} before the preview domain"));
  if (label.find('.') != std::string_view::npos) {
    return Fail(Bad("a preview host has one label before the preview domain: {port}-{workspace}"));
  }
  if (label.size() > kMaxLabel) return Fail(Bad("a preview host's label is longer than 63 characters"));
  auto dash = label.find('-');
  if (dash == std::string_view::npos || dash == 0) {
    return Fail(Bad("a preview host starts with the port: {port}-{workspace}"));
  }
  auto digits = label.substr(0, dash);
  for (char c : digits) {
    if (!IsDigit(c)) return Fail(Bad("a preview host's port is decimal digits, no sign or space"));
  }
  if (digits.front() == '0') return Fail(Bad("a preview host's port has no leading zero"));
  auto port = ParseStrictPort(digits);
  if (!port) return Fail(Bad("a preview host's port is 1 to 65535"));
  auto ws = label.substr(dash + 1);
  if (!IsWorkspaceRef(ws)) {
    return Fail(Bad("a preview host names a workspace by its id or its name (letters, digits, '-')"));
  }
  return std::optional<PreviewAddress>{PreviewAddress{*port, std::string(ws)}};
}

std::optional<uint16_t> ParseStrictPort(std::string_view digits) {
  if (digits.empty() || digits.size() > 5 || digits.front() == '0') return std::nullopt;
  uint32_t port = 0;
  for (char c : digits) {
    if (!IsDigit(c)) return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port > 65535) return std::nullopt;
  return static_cast<uint16_t>(port);
}

std::optional<std::string> PreviewLabel(uint16_t port, std::string_view workspace) {
  std::string label = fmt::format("{}-{}", port, Lower(workspace));
  if (port == 0 || label.size() > kMaxLabel) return std::nullopt;
  return label;
}

Status ValidatePreviewDomain(std::string_view domain) {
  auto bad = [&] {
    return Fail(Bad(fmt::format("'{}' is not a preview domain: lowercase DNS labels joined by dots", domain)));
  };
  if (domain.empty() || domain.size() > 253 || domain.front() == '.' || domain.back() == '.') return bad();
  size_t start = 0;
  while (start <= domain.size()) {
    auto end = domain.find('.', start);
    if (end == std::string_view::npos) end = domain.size();
    auto label = domain.substr(start, end - start);
    if (label.empty() || label.size() > kMaxLabel || label.front() == '-' || label.back() == '-') return bad();
    for (char c : label) {
      if (!IsLower(c) && !IsDigit(c) && c != '-') return bad();
    }
    start = end + 1;
  }
  return {};
}

}  // namespace berth::preview
