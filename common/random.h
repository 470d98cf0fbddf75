// Random identifiers and secrets from OpenSSL's CSPRNG, and SHA-256 in hex.
#pragma once

#include <string>
#include <string_view>

namespace berth {

// `bytes` random bytes as lowercase hex (2 characters per byte). Aborts if the CSPRNG fails:
// there is no safe fallback for a secret.
std::string RandomHex(size_t bytes);
// "prefix_" followed by 16 hex characters (64 bits): workspace, key and tenant ids.
std::string NewId(std::string_view prefix);
std::string Sha256Hex(std::string_view data);
// A random RFC 4122 version 4 UUID.
std::string NewUuid();

}  // namespace berth
