// Helpers shared by the files API tests: hashing, local trees, deadlines.
#pragma once

#include <dirent.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "tests/support/wait.h"
#include "tests/support/temp_dir.h"

namespace berth::testing {

// A temporary directory any user may reach (mkdtemp makes 0700 ones).
class WorldDir : public TempDir {
 public:
  explicit WorldDir(const std::string& prefix = "berth-files") : TempDir(prefix) {
    ::chmod(path().c_str(), 0755);
  }
};

// Incremental SHA-256 as a hex string.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view data) { EVP_DigestUpdate(ctx_, data.data(), data.size()); }
  std::string Hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    std::string out;
    for (unsigned i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

inline std::string Sha256Of(std::string_view data) {
  Sha256 h;
  h.Update(data);
  return h.Hex();
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, std::string_view data, mode_t mode = 0644) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  ::chmod(path.c_str(), mode);
}

// Deterministic pseudo-random bytes (xorshift64*), for data generated on the fly.
class ByteGenerator {
 public:
  explicit ByteGenerator(uint64_t seed) : state_(seed | 1) {}
  void Fill(char* buf, size_t size) {
    for (size_t i = 0; i < size; i += 8) {
      state_ ^= state_ >> 12;
      state_ ^= state_ << 25;
      state_ ^= state_ >> 27;
      uint64_t v = state_ * 0x2545F4914F6CDD1DULL;
      std::memcpy(buf + i, &v, std::min<size_t>(8, size - i));
    }
  }

 private:
  uint64_t state_;
};

inline std::string RandomBytes(size_t size, uint64_t seed) {
  std::string out(size, '\0');
  ByteGenerator(seed).Fill(out.data(), size);
  return out;
}

// Polls `condition` until it holds or `timeout` passes.
using berth::testing::WaitFor;

// A description of a tree: relative path -> "type mode [content hash | link target]".
inline std::map<std::string, std::string> DescribeTree(const std::string& root) {
  std::map<std::string, std::string> out;
  for (auto it = std::filesystem::recursive_directory_iterator(root);
       it != std::filesystem::recursive_directory_iterator(); ++it) {
    std::string path = it->path().string();
    std::string rel = path.substr(root.size() + 1);
    struct stat st {};
    lstat(path.c_str(), &st);
    std::string mode = fmt::format("{:04o}", st.st_mode & 07777);
    if (S_ISLNK(st.st_mode)) {
      out[rel] = "symlink -> " + std::filesystem::read_symlink(path).string();
    } else if (S_ISDIR(st.st_mode)) {
      out[rel] = "dir " + mode;
    } else {
      out[rel] = "file " + mode + " " + Sha256Of(ReadFile(path));
    }
  }
  return out;
}

}  // namespace berth::testing
