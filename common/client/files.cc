#include "common/client/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "common/http/url.h"
#include "common/json.h"
#include "common/tar/tar_create.h"
#include "common/tar/tar_extract.h"
#include "common/unique.h"

namespace berth::client {
namespace {

using http::bhttp::verb;

// JSON answers of the files API are small; anything bigger is not one.
constexpr size_t kMaxAnswerBytes = 4u << 20;
// Bytes queued between libarchive's helper thread and the HTTP stream.
constexpr size_t kPipeBytes = 1u << 20;

// A bounded byte queue between one producer thread and one consumer thread.
class BlockingPipe {
 public:
  // Queues `data`, waiting for room. Fails once aborted; drops data once the reader is done.
  Status Push(std::string_view data) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return abort_ || reader_done_ || bytes_ < kPipeBytes; });
    if (abort_) return Fail(*abort_);
    if (reader_done_) return {};
    bytes_ += data.size();
    chunks_.emplace_back(data);
    changed_.notify_all();
    return {};
  }
  // The next chunk; "" at the end.
  Result<std::string> Pop() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return abort_ || finished_ || !chunks_.empty(); });
    if (abort_) return Fail(*abort_);
    if (chunks_.empty()) return std::string();
    std::string chunk = std::move(chunks_.front());
    chunks_.pop_front();
    bytes_ -= chunk.size();
    changed_.notify_all();
    return chunk;
  }
  // Up to `size` bytes into `buf`; 0 at the end.
  Result<size_t> Read(char* buf, size_t size) {
    while (offset_ >= current_.size()) {
      auto chunk = Pop();
      if (!chunk) return Fail(chunk.error());
      if (chunk->empty()) return size_t{0};
      current_ = std::move(*chunk);
      offset_ = 0;
    }
    size_t n = std::min(size, current_.size() - offset_);
    std::memcpy(buf, current_.data() + offset_, n);
    offset_ += n;
    return n;
  }
  void Finish() { Set([&] { finished_ = true; }); }
  void ReaderDone() { Set([&] { reader_done_ = true; }); }
  void Abort(const Error& why) {
    Set([&] {
      if (!abort_) abort_ = why;
    });
  }

 private:
  template <class F>
  void Set(F f) {
    std::lock_guard lock(mutex_);
    f();
    changed_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> chunks_;
  size_t bytes_ = 0;
  bool finished_ = false;
  bool reader_done_ = false;
  std::optional<Error> abort_;
  std::string current_;  // Read(): the chunk being consumed
  size_t offset_ = 0;
};

// A sink that keeps a small JSON answer.
BodySink Collect(std::string& out) {
  return [&out](std::string_view data) -> Status {
    if (out.size() + data.size() > kMaxAnswerBytes) {
      return Fail(ErrorCode::kTooLarge, "files API answer over the limit");
    }
    out.append(data);
    return {};
  };
}

Result<nlohmann::json> ParseAnswer(const std::string& body) {
  auto json = ParseJson(body);
  if (!json) return Fail(ErrorCode::kInternal, "files API answered " + json.error().message);
  return json;
}

std::optional<uint64_t> ContentLength(const Response& head) {
  auto text = head.Header("Content-Length");
  if (text.empty()) return std::nullopt;
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc()) return std::nullopt;
  return n;
}

std::vector<std::pair<std::string, std::string>> UploadQuery(const UploadOptions& options) {
  std::vector<std::pair<std::string, std::string>> query;
  if (options.mode) query.emplace_back("mode", protocol::FormatMode(*options.mode));
  if (!options.overwrite) query.emplace_back("overwrite", "0");
  return query;
}

}  // namespace

std::string FilesTarget(std::string_view scope, std::string_view path,
                        const std::vector<std::pair<std::string, std::string>>& query,
                        std::string_view user) {
  std::string target = fmt::format("{}/files{}", scope, http::PercentEncode(path, true));
  char sep = '?';
  auto add = [&](std::string_view k, std::string_view v) {
    target += sep;
    target += http::PercentEncode(k, false);
    target += '=';
    target += http::PercentEncode(v, false);
    sep = '&';
  };
  for (const auto& [k, v] : query) add(k, v);
  if (!user.empty()) add("user", user);
  return target;
}

Result<protocol::FileInfo> Upload(ApiClient& client, std::string_view scope,
                                  const std::string& remote_path, const BodySource& source,
                                  std::optional<uint64_t> length, const UploadOptions& options) {
  uint64_t sent = 0;
  BodySource counted = [&](char* buf, size_t size) -> Result<size_t> {
    auto n = source(buf, size);
    if (n && *n > 0) {
      sent += *n;
      if (options.progress) options.progress(sent, length);
    }
    return n;
  };
  std::string answer;
  auto status = client.Stream(verb::put, FilesTarget(scope, remote_path, UploadQuery(options), options.user),
                              {{"Content-Type", "application/octet-stream"}}, counted, length,
                              Collect(answer));
  if (!status) return Fail(status.error());
  auto json = ParseAnswer(answer);
  if (!json) return Fail(json.error());
  return protocol::FileInfoFromJson(*json);
}

Result<protocol::FileInfo> UploadBytes(ApiClient& client, std::string_view scope,
                                       const std::string& remote_path, std::string_view data,
                                       const UploadOptions& options) {
  std::string answer;
  auto status = client.StreamBuffered(
      verb::put, FilesTarget(scope, remote_path, UploadQuery(options), options.user),
      {{"Content-Type", "application/octet-stream"}}, data, Collect(answer));
  if (!status) return Fail(status.error());
  if (options.progress) options.progress(data.size(), data.size());
  auto json = ParseAnswer(answer);
  if (!json) return Fail(json.error());
  return protocol::FileInfoFromJson(*json);
}

Result<protocol::FileInfo> UploadFile(ApiClient& client, std::string_view scope,
                                      const std::string& local_path, const std::string& remote_path,
                                      const UploadOptions& options) {
  UniqueFd fd(::open(local_path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd || fstat(fd.get(), &st) != 0) return Fail(ErrnoError(errno, "open " + local_path));
  if (!S_ISREG(st.st_mode)) {
    return Fail(ErrorCode::kInvalidArgument, local_path + " is not a regular file");
  }
  BodySource source = [&](char* buf, size_t size) -> Result<size_t> {
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, size);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) return Fail(ErrnoError(errno, "read " + local_path));
    }
  };
  return Upload(client, scope, remote_path, source, static_cast<uint64_t>(st.st_size), options);
}

Status Download(ApiClient& client, std::string_view scope, const std::string& remote_path,
                const BodySink& sink, const DownloadOptions& options) {
  uint64_t got = 0;
  std::optional<uint64_t> total;
  BodySink counted = [&](std::string_view data) -> Status {
    got += data.size();
    if (options.progress) options.progress(got, total);
    return sink(data);
  };
  return client.Stream(verb::get, FilesTarget(scope, remote_path, {}, options.user), {}, nullptr,
                       std::nullopt, counted,
                       [&](const Response& head) { total = ContentLength(head); });
}

Status DownloadFile(ApiClient& client, std::string_view scope, const std::string& remote_path,
                    const std::string& local_path, const DownloadOptions& options) {
  std::string temp = local_path + ".berth-part-XXXXXX";
  UniqueFd fd(mkstemp(temp.data()));
  if (!fd) return Fail(ErrnoError(errno, "create " + temp));
  BodySink sink = [&](std::string_view data) -> Status {
    while (!data.empty()) {
      ssize_t n = ::write(fd.get(), data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Fail(ErrnoError(errno, "write " + local_path));
      data.remove_prefix(static_cast<size_t>(n));
    }
    return {};
  };
  auto status = Download(client, scope, remote_path, sink, options);
  if (status && fchmod(fd.get(), 0644) != 0) status = Fail(ErrnoError(errno, "chmod " + temp));
  if (status && ::rename(temp.c_str(), local_path.c_str()) != 0) {
    status = Fail(ErrnoError(errno, "rename to " + local_path));
  }
  if (!status) ::unlink(temp.c_str());
  return status;
}

Result<protocol::FileInfo> Stat(ApiClient& client, std::string_view scope, const std::string& path,
                                const FileCallOptions& options) {
  auto json = client.Json(verb::get, FilesTarget(scope, path, {{"stat", "1"}}, options.user));
  if (!json) return Fail(json.error());
  return protocol::FileInfoFromJson(*json);
}

Result<protocol::DirListing> List(ApiClient& client, std::string_view scope,
                                  const std::string& path, const FileCallOptions& options) {
  std::string answer;
  bool is_json = false;
  auto status = client.Stream(verb::get, FilesTarget(scope, path, {}, options.user), {}, nullptr,
                              std::nullopt, Collect(answer), [&](const Response& head) {
                                is_json = head.Header("Content-Type").starts_with("application/json");
                              });
  if (!status) return Fail(status.error());
  if (!is_json) return Fail(ErrorCode::kFailedPrecondition, path + " is not a directory");
  auto json = ParseAnswer(answer);
  if (!json) return Fail(json.error());
  return protocol::DirListingFromJson(*json);
}

Result<protocol::FileInfo> Mkdir(ApiClient& client, std::string_view scope,
                                 const std::string& path, bool parents,
                                 std::optional<uint32_t> mode, const FileCallOptions& options) {
  std::vector<std::pair<std::string, std::string>> query = {{"op", "mkdir"}};
  if (parents) query.emplace_back("parents", "1");
  if (mode) query.emplace_back("mode", protocol::FormatMode(*mode));
  auto json = client.Json(verb::post, FilesTarget(scope, path, query, options.user));
  if (!json) return Fail(json.error());
  return protocol::FileInfoFromJson(*json);
}

Result<protocol::FileInfo> Move(ApiClient& client, std::string_view scope, const std::string& from,
                                const std::string& to, bool overwrite,
                                const FileCallOptions& options) {
  std::vector<std::pair<std::string, std::string>> query = {{"op", "move"}, {"to", to}};
  if (overwrite) query.emplace_back("overwrite", "1");
  auto json = client.Json(verb::post, FilesTarget(scope, from, query, options.user));
  if (!json) return Fail(json.error());
  return protocol::FileInfoFromJson(*json);
}

Status Remove(ApiClient& client, std::string_view scope, const std::string& path, bool recursive,
              const FileCallOptions& options) {
  std::vector<std::pair<std::string, std::string>> query;
  if (recursive) query.emplace_back("recursive", "1");
  auto json = client.Json(verb::delete_, FilesTarget(scope, path, query, options.user));
  if (!json) return Fail(json.error());
  return {};
}

Result<protocol::TarResult> UploadTar(ApiClient& client, std::string_view scope,
                                      const std::string& local_dir, const std::string& remote_dir,
                                      const UploadOptions& options) {
  BlockingPipe pipe;
  std::optional<Result<tar::TarStats>> made;
  std::thread producer([&] {
    made = tar::CreateTar(local_dir, [&](std::string_view data) { return pipe.Push(data); });
    if (*made) {
      pipe.Finish();
    } else {
      pipe.Abort(made->error());
    }
  });
  uint64_t sent = 0;
  BodySource source = [&](char* buf, size_t size) -> Result<size_t> {
    auto n = pipe.Read(buf, size);
    if (n && *n > 0) {
      sent += *n;
      if (options.progress) options.progress(sent, std::nullopt);
    }
    return n;
  };
  std::string answer;
  auto status = client.Stream(verb::put, FilesTarget(scope, remote_dir, {{"archive", "tar"}}, options.user),
                              {{"Content-Type", "application/x-tar"}}, source, std::nullopt,
                              Collect(answer));
  if (!status) pipe.Abort(status.error());
  producer.join();
  if (!*made) return Fail(made->error());  // the local side's failure explains the rest
  if (!status) return Fail(status.error());
  auto json = ParseAnswer(answer);
  if (!json) return Fail(json.error());
  return protocol::TarResultFromJson(*json);
}

Result<protocol::TarResult> DownloadTar(ApiClient& client, std::string_view scope,
                                        const std::string& remote_dir, const std::string& local_dir,
                                        const DownloadOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(local_dir, ec);
  if (ec) return Fail(ErrnoError(ec.value(), "create " + local_dir));
  BlockingPipe pipe;
  std::optional<Result<tar::TarStats>> extracted;
  std::thread extractor([&] {
    std::string current;
    extracted = tar::ExtractTar(local_dir, [&]() -> Result<std::string_view> {
      auto chunk = pipe.Pop();
      if (!chunk) return Fail(chunk.error());
      current = std::move(*chunk);
      return std::string_view(current);
    });
    if (*extracted) {
      pipe.ReaderDone();  // the rest (the archive's zero padding) is dropped
    } else {
      pipe.Abort(extracted->error());
    }
  });
  uint64_t got = 0;
  BodySink sink = [&](std::string_view data) -> Status {
    got += data.size();
    if (options.progress) options.progress(got, std::nullopt);
    return pipe.Push(data);
  };
  auto status = client.Stream(verb::get,
                              FilesTarget(scope, remote_dir, {{"archive", "tar"}}, options.user),
                              {}, nullptr, std::nullopt, sink);
  if (status) {
    pipe.Finish();
  } else {
    pipe.Abort(status.error());
  }
  extractor.join();
  if (!*extracted) {
    // A failed request is the cause when the extractor only saw the stream cut.
    if (!status && extracted->error().message == status.error().message) return Fail(status.error());
    return Fail(extracted->error());
  }
  protocol::TarResult result;
  result.entries = (*extracted)->entries;
  result.bytes = (*extracted)->bytes;
  result.skipped = (*extracted)->skipped;
  return result;
}

Status Watch(ApiClient& client, std::string_view scope, const std::string& dir, bool recursive,
             const std::function<bool(const protocol::WatchEvent&)>& on_event,
             const FileCallOptions& options) {
  std::vector<std::pair<std::string, std::string>> query = {{"watch", "1"}};
  if (recursive) query.emplace_back("recursive", "1");
  bool stopped = false;
  NdjsonSplitter splitter([&](const nlohmann::json& line) -> Status {
    auto event = protocol::WatchEventFromJson(line);
    if (!event) return Fail(event.error());
    if (event->type == "keepalive") return {};
    if (!on_event(*event)) {
      stopped = true;
      return Fail(ErrorCode::kFailedPrecondition, "watch stopped by the caller");
    }
    return {};
  });
  auto status = client.Stream(verb::get, FilesTarget(scope, dir, query, options.user), {}, nullptr,
                              std::nullopt,
                              [&](std::string_view data) { return splitter.Feed(data); });
  if (stopped) return {};
  if (!status) return status;
  return splitter.Finish();
}

}  // namespace berth::client
