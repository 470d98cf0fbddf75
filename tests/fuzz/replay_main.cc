// Runs files through LLVMFuzzerTestOneInput without libFuzzer: the corpus replay CI runs with
// g++ (and under ASan/UBSan with -DBERTH_FUZZ_SANITIZE=ON). Arguments: files or directories.
//
// `--mutate N [--seed S] [--save DIR]` also runs N random mutations of the corpus inputs (bit
// flips, byte changes, inserts, deletes, duplicated and spliced ranges): a coverage-blind
// fuzzer for when no libFuzzer toolchain is at hand (see README.md). Each input is written to
// DIR/current before it runs, so a crash or a hang (the target aborts) leaves it behind.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::string Mutate(std::string input, const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  static const char* kTokens[] = {"\r\n", "\r\n\r\n", "%", "%00", "%2e%2e/", "{", "}", "[", "]",
                                  "\"", ":", ",", "0", "-1", "18446744073709551616", "chunked",
                                  "Content-Length: ", "Transfer-Encoding: chunked\r\n",
                                  "Upgrade: websocket\r\n", "?port=", "&host=", "/v1/", "\xff",
                                  "\0", "9999999999", "1e308", "null", "true"};
  int rounds = 1 + static_cast<int>(pick(4));
  for (int i = 0; i < rounds; ++i) {
    switch (pick(7)) {
      case 0:  // flip a bit
        if (!input.empty()) input[pick(input.size())] ^= static_cast<char>(1u << pick(8));
        break;
      case 1:  // set a byte
        if (!input.empty()) input[pick(input.size())] = static_cast<char>(rng());
        break;
      case 2: {  // insert a token
        const char* t = kTokens[pick(std::size(kTokens))];
        size_t len = std::strlen(t) == 0 ? 1 : std::strlen(t);
        input.insert(pick(input.size() + 1), std::string(t, len));
        break;
      }
      case 3:  // delete a range
        if (!input.empty()) {
          size_t at = pick(input.size());
          input.erase(at, 1 + pick(std::min<size_t>(32, input.size() - at)));
        }
        break;
      case 4:  // duplicate a range
        if (!input.empty()) {
          size_t at = pick(input.size());
          std::string piece = input.substr(at, 1 + pick(64));
          input.insert(pick(input.size() + 1), piece);
        }
        break;
      case 5: {  // splice with another corpus input
        const std::string& other = corpus[pick(corpus.size())];
        size_t cut = pick(input.size() + 1);
        size_t from = pick(other.size() + 1);
        input = input.substr(0, cut) + other.substr(from);
        break;
      }
      case 6:  // truncate
        input.resize(pick(input.size() + 1));
        break;
    }
  }
  if (input.size() > 64 * 1024) input.resize(64 * 1024);
  return input;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  long long mutations = 0;
  uint64_t seed = 1;
  std::filesystem::path save_dir = std::filesystem::temp_directory_path();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--mutate" && i + 1 < argc) {
      mutations = std::atoll(argv[++i]);
      continue;
    }
    if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
      continue;
    }
    if (arg == "--save" && i + 1 < argc) {
      save_dir = argv[++i];
      continue;
    }
    std::filesystem::path p = arg;
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s [--mutate N [--seed S] [--save DIR]] FILE|DIR...\n", argv[0]);
    return 2;
  }
  std::vector<std::string> corpus;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay %s (%zu bytes)\n", f.c_str(), data.size());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    corpus.push_back(std::move(data));
  }
  std::fprintf(stderr, "replayed %zu inputs\n", files.size());
  if (mutations > 0) {
    std::mt19937_64 rng(seed);
    std::filesystem::path current = save_dir / "berth-fuzz-current";
    for (long long i = 0; i < mutations; ++i) {
      std::string input = Mutate(corpus[rng() % corpus.size()], corpus, rng);
      std::ofstream(current, std::ios::binary | std::ios::trunc) << input;
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
      if ((i + 1) % 10000 == 0) std::fprintf(stderr, "mutations: %lld\n", i + 1);
    }
    std::filesystem::remove(current);
    std::fprintf(stderr, "ran %lld mutations (seed %llu)\n", mutations,
                 static_cast<unsigned long long>(seed));
  }
  return 0;
}
