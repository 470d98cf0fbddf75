#include "common/random.h"

#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdlib>

#include <fmt/format.h>

namespace berth {
namespace {

std::string Hex(const unsigned char* data, size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 15]);
  }
  return out;
}

}  // namespace

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    std::abort();
  }
  return Hex(reinterpret_cast<const unsigned char*>(raw.data()), bytes);
}

std::string NewId(std::string_view prefix) { return fmt::format("{}_{}", prefix, RandomHex(8)); }

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return Hex(digest, sizeof(digest));
}

std::string NewUuid() {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof(b)) != 1) std::abort();
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  std::string h = Hex(b, sizeof(b));
  return fmt::format("{}-{}-{}-{}-{}", h.substr(0, 8), h.substr(8, 4), h.substr(12, 4),
                     h.substr(16, 4), h.substr(20));
}

}  // namespace berth
