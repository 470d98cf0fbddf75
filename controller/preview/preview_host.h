// Preview hosts: `{port}-{workspace}.{preview domain}`, parsed once into what is authorised and
// forwarded (issue 13, DESIGN.md "Ports and previews"). Pure; any thread.
//
// The rules, strict on purpose, since the parse decides which guest port a request reaches:
//  - The Host header is the only source (no X-Forwarded-Host). An optional `:port` after it
//    must be decimal digits (the listener's port; not interpreted).
//  - Names compare case-insensitively (a host is lowercased first).
//  - The label before the domain is one DNS label, at most 63 characters: `{port}-{ws}`, the
//    port decimal 1-65535 with no sign, no leading zero, no space; `{ws}` a workspace id
//    (`ws_` and hex) or name (lowercase letters, digits and '-').
//  - Nothing else: no trailing dot, no second label in front, no userinfo, no brackets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace berth::preview {

// What a preview host names.
struct PreviewAddress {
  uint16_t port = 0;
  std::string workspace;  // an id or a name, lowercase
  bool operator==(const PreviewAddress&) const = default;
};

// nullopt: `host` is not under `domain` at all (the request is for the API). An error
// (invalid_argument, the message says what is wrong): it is a host under `domain` that does not
// follow the rules, which must never reach the API or a guest. `domain` is lowercase, without
// a leading or trailing dot (PreviewConfig checks it).
Result<std::optional<PreviewAddress>> ParsePreviewHost(std::string_view host, std::string_view domain);

// A port written strictly: decimal 1-65535, no sign, space or leading zero (the Host's
// `{port}`, a pass's, the API's `{port}` in a path); nullopt otherwise.
std::optional<uint16_t> ParseStrictPort(std::string_view digits);

// The label `{port}-{ws}` for a workspace reference (id or name), or nullopt when it would not
// fit in one DNS label.
std::optional<std::string> PreviewLabel(uint16_t port, std::string_view workspace);

// The longest workspace name whose every port has a preview label: 63, less "65535-".
inline constexpr size_t kMaxPreviewableName = 63 - 6;

// Whether `domain` can be a preview domain: lowercase DNS labels (letters, digits, '-') joined
// by dots, at most 253 characters, no leading or trailing dot.
Status ValidatePreviewDomain(std::string_view domain);

}  // namespace berth::preview
