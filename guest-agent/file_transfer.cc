// GET of a file (streamed, with single byte ranges) or a directory (a listing), and PUT of a
// file (streamed into an atomic upload).
#include <sys/stat.h>

#include <charconv>
#include <vector>

#include <fmt/format.h>

#include "common/json.h"
#include "common/protocol/files.h"
#include "guest-agent/file_handlers.h"
#include "guest-agent/fs_ops.h"
#include "guest-agent/fs_upload.h"

namespace berth::agent::files {
namespace {

using http::bhttp::status;
using http::Exchange;
using http::Task;

struct ByteRange {
  uint64_t first = 0;
  uint64_t length = 0;
};

// The single range of a "Range: bytes=a-b | a- | -n" header against a file of `size` bytes.
// nullopt: no usable range (absent, several, or malformed: the whole file is sent, as RFC 9110
// allows); an error: unsatisfiable.
Result<std::optional<ByteRange>> ParseRange(std::string_view header, uint64_t size) {
  constexpr std::string_view kUnit = "bytes=";
  if (!header.starts_with(kUnit) || header.find(',') != std::string_view::npos) {
    return std::optional<ByteRange>();
  }
  header.remove_prefix(kUnit.size());
  auto dash = header.find('-');
  if (dash == std::string_view::npos) return std::optional<ByteRange>();
  auto number = [](std::string_view text, uint64_t& out) {
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
  };
  std::string_view a = header.substr(0, dash), b = header.substr(dash + 1);
  uint64_t first = 0, last = 0;
  if (a.empty()) {  // the last b bytes
    if (!number(b, last)) return std::optional<ByteRange>();
    if (last == 0 || size == 0) return Fail(ErrorCode::kInvalidArgument, "range not satisfiable");
    uint64_t n = std::min(last, size);
    return std::optional<ByteRange>(ByteRange{size - n, n});
  }
  if (!number(a, first)) return std::optional<ByteRange>();
  if (b.empty()) {
    last = size == 0 ? 0 : size - 1;
  } else if (!number(b, last) || last < first) {
    return std::optional<ByteRange>();
  }
  if (first >= size) return Fail(ErrorCode::kInvalidArgument, "range not satisfiable");
  last = std::min(last, size - 1);
  return std::optional<ByteRange>(ByteRange{first, last - first + 1});
}

// What the chunks of one upload's body share.
struct UploadState {
  UploadState(ApiContext& s, const FileRequest& r, fs::AtomicUpload& u)
      : ctx(s), req(r), upload(u) {}
  ApiContext& ctx;
  const FileRequest& req;
  fs::AtomicUpload& upload;
  std::optional<Error> failure;  // the first write error; the rest of the body is dropped
  uint64_t drained = 0;
};

Task<Status> WriteUploadChunk(UploadState& state, std::string_view data) {
  if (state.failure) {
    state.drained += data.size();
    if (state.drained > kDrainBytes) co_return Fail(*state.failure);
    co_return Status{};
  }
  fs::AtomicUpload& upload = state.upload;
  auto written = co_await RunBlocking(state.ctx.blocking,
                                      [&upload, data] { return upload.Write(data); });
  if (!written) {
    state.failure = written.error();
    // Drop the temporary now: on a full disk its blocks are what the rest of the system needs.
    co_await RunAs(state.ctx, state.req.user, [&upload] {
      upload.Abort();
      return Status{};
    });
  }
  co_return Status{};
}

Task<void> SendUnsatisfiable(Exchange& ex, uint64_t size) {
  http::bhttp::response<http::bhttp::string_body> res{status::range_not_satisfiable, 11};
  res.set(http::bhttp::field::content_type, "application/json");
  res.set(http::bhttp::field::content_range, fmt::format("bytes */{}", size));
  nlohmann::json body = {
      {"error",
       {{"code", "invalid_argument"}, {"message", "range not satisfiable"}}}};
  res.body() = DumpJson(body);
  co_await ex.Send(std::move(res));
}

}  // namespace

Task<void> GetContent(Exchange& ex, ApiContext& ctx, const FileRequest& req) {
  auto opened = co_await RunAs(ctx, req.user, [&] { return fs::OpenForRead(req.path); });
  if (!opened) {
    co_await ex.SendError(opened.error());
    co_return;
  }
  if (S_ISDIR(opened->st.st_mode)) {
    auto listing = co_await RunAs(ctx, req.user, [&] {
      return fs::ListDir(std::move(opened->fd), req.path);
    });
    if (!listing) {
      co_await ex.SendError(listing.error());
      co_return;
    }
    nlohmann::json body = protocol::ToJson(*listing);
    co_await ex.SendJson(status::ok, body);
    co_return;
  }
  if (!S_ISREG(opened->st.st_mode)) {
    co_await ex.SendError({ErrorCode::kFailedPrecondition,
                           fmt::format("{} is not a regular file or a directory", req.path)});
    co_return;
  }

  uint64_t size = static_cast<uint64_t>(opened->st.st_size);
  ByteRange range{0, size};
  std::vector<std::pair<std::string, std::string>> headers = {{"Accept-Ranges", "bytes"}};
  status code = status::ok;
  if (auto header = ex.header(http::bhttp::field::range); !header.empty()) {
    auto parsed = ParseRange(header, size);
    if (!parsed) co_return co_await SendUnsatisfiable(ex, size);
    if (*parsed) {
      range = **parsed;
      code = status::partial_content;
      headers.emplace_back("Content-Range", fmt::format("bytes {}-{}/{}", range.first,
                                                        range.first + range.length - 1, size));
    }
  }
  if (!co_await ex.BeginFixed(code, "application/octet-stream", range.length, headers)) co_return;

  int fd = opened->fd.get();
  std::vector<char> buf(std::min<uint64_t>(kChunkBytes, std::max<uint64_t>(range.length, 1)));
  uint64_t offset = range.first;
  uint64_t remaining = range.length;
  while (remaining > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), remaining));
    auto got = co_await RunBlocking(ctx.blocking,
                                    [&] { return fs::ReadAt(fd, buf.data(), want, offset); });
    if (!got || *got == 0) {
      // The promised length cannot be met (the file shrank, or a read error): cutting the
      // connection is the only way left to tell the client.
      Error error = got ? Error{ErrorCode::kInternal, req.path + " shrank while read"}
                        : got.error();
      co_await ex.SendError(error);
      co_return;
    }
    if (!co_await ex.WriteRaw(std::string_view(buf.data(), *got))) co_return;
    offset += *got;
    remaining -= *got;
  }
}

Task<void> PutContent(Exchange& ex, ApiContext& ctx, const FileRequest& req) {
  auto overwrite = ex.query().GetBool("overwrite", true);
  if (!overwrite) {
    co_await ex.SendError(overwrite.error());
    co_return;
  }
  std::optional<mode_t> mode;
  if (auto text = ex.query().Get("mode")) {
    auto parsed = protocol::ParseMode(*text);
    if (!parsed) {
      co_await ex.SendError(parsed.error());
      co_return;
    }
    mode = static_cast<mode_t>(*parsed);
  }
  auto begun = co_await RunAs(ctx, req.user, [&] {
    return fs::AtomicUpload::Begin(req.path, mode, *overwrite);
  });
  if (!begun) {
    co_await ex.SendError(begun.error());
    co_return;
  }
  fs::AtomicUpload upload = std::move(*begun);

  UploadState state(ctx, req, upload);
  // Not a coroutine lambda: g++ 12 miscompiles lambdas nested in coroutine lambdas.
  Exchange::ChunkSink sink = [&state](std::string_view data) { return WriteUploadChunk(state, data); };
  auto body = co_await ex.ReadBodyChunks(sink, kChunkBytes);
  if (!body || state.failure) {
    co_await RunAs(ctx, req.user, [&] {
      upload.Abort();
      return Status{};
    });
    Error error = state.failure ? *state.failure : body.error();
    co_await ex.SendError(error);
    co_return;
  }
  auto committed = co_await RunAs(ctx, req.user,
                                  [&]() -> Result<std::pair<bool, protocol::FileInfo>> {
                                    auto replaced = upload.Commit();
                                    if (!replaced) {
                                      upload.Abort();
                                      return Fail(replaced.error());
                                    }
                                    auto info = fs::Stat(req.path);
                                    if (!info) return Fail(info.error());
                                    return std::make_pair(*replaced, std::move(*info));
                                  });
  if (!committed) {
    co_await ex.SendError(committed.error());
    co_return;
  }
  nlohmann::json answer = protocol::ToJson(committed->second);
  const auto code = committed->first ? status::ok : status::created;
  co_await ex.SendJson(code, answer);
}

}  // namespace berth::agent::files
