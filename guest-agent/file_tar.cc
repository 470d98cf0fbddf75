// Directory archives: GET ?archive=tar streams a tar of a directory as libarchive produces it;
// PUT ?archive=tar extracts a tar body as it arrives. libarchive runs on the blocking pool
// with the user's credentials; a ChunkBridge carries the bytes to and from the socket with
// backpressure, so neither side ever holds more than a few chunks.
#include <sys/stat.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <fmt/format.h>

#include "common/protocol/files.h"
#include "common/tar/tar_create.h"
#include "common/tar/tar_extract.h"
#include "guest-agent/file_bridge.h"
#include "guest-agent/file_handlers.h"
#include "guest-agent/fs_ops.h"

namespace berth::agent::files {
namespace {

using namespace boost::asio::experimental::awaitable_operators;
using http::bhttp::status;
using http::Exchange;
using http::Task;

// Chunks queued between libarchive and the socket.
constexpr size_t kBridgeBytes = 4 * kChunkBytes;

// The halves of a transfer are free coroutine functions, not coroutine lambdas: g++ 12
// miscompiles lambdas nested in coroutine lambdas.

// Blocking pool: libarchive writes the tar of req.path into the bridge.
Task<Result<tar::TarStats>> ProduceTar(ApiContext& ctx, const FileRequest& req,
                                       ChunkBridge& b) {
  co_return co_await RunAs(ctx, req.user, [&req, &b]() -> Result<tar::TarStats> {
    auto stats = tar::CreateTar(
        req.path, [&b](std::string_view data) { return b.Push(std::string(data)); },
        kChunkBytes);
    if (stats) {
      b.Finish();
    } else {
      b.Abort(stats.error());
    }
    return stats;
  });
}

// I/O thread: the bridge's chunks go out as HTTP chunks.
Task<Status> SendTarChunks(Exchange& ex, ChunkBridge& bridge) {
  for (;;) {
    auto chunk = co_await bridge.AsyncPop();
    if (!chunk) co_return Fail(chunk.error());
    if (chunk->empty()) co_return Status{};
    if (auto written = co_await ex.WriteChunk(*chunk); !written) {
      bridge.Abort(written.error());
      co_return written;
    }
  }
}

// Blocking pool: libarchive extracts what the bridge brings into req.path.
Task<Result<tar::TarStats>> ExtractFromBridge(ApiContext& ctx, const FileRequest& req,
                                              ChunkBridge& b) {
  co_return co_await RunAs(ctx, req.user, [&req, &b]() -> Result<tar::TarStats> {
    std::string current;  // the piece libarchive reads from, alive until the next call
    // Inside the guest, as the request's user: the user's own archive may hold FIFOs and
    // set-id files, as a tar run by that user would restore them.
    tar::ExtractOptions options;
    options.keep_setid = true;
    options.fifos = true;
    auto stats = tar::ExtractTar(
        req.path,
        [&b, &current]() -> Result<std::string_view> {
          auto chunk = b.Pop();
          if (!chunk) return Fail(chunk.error());
          current = std::move(*chunk);
          return std::string_view(current);
        },
        options);
    // Either way the extractor takes no more: the feeder drops what is left of the body.
    b.Abort(stats ? Error{ErrorCode::kInternal, "archive complete"} : stats.error());
    return stats;
  });
}

struct FeedState {
  explicit FeedState(ChunkBridge& b) : bridge(b) {}
  ChunkBridge& bridge;
  bool extracting = true;
  uint64_t dropped = 0;
};

Task<Status> FeedChunk(FeedState& state, std::string_view data) {
  if (state.extracting) {
    std::string chunk(data);
    Status pushed = co_await state.bridge.AsyncPush(chunk);
    if (pushed) co_return Status{};
    state.extracting = false;
  }
  // After the archive's end (zero padding) or after a refusal: read and drop, bounded.
  state.dropped += data.size();
  if (state.dropped > kDrainBytes) {
    co_return Fail(ErrorCode::kInvalidArgument, "too much data after the end of the archive");
  }
  co_return Status{};
}

// I/O thread: the request body goes into the bridge.
Task<Status> FeedBridge(Exchange& ex, ChunkBridge& bridge) {
  FeedState state(bridge);
  Exchange::ChunkSink sink = [&state](std::string_view data) { return FeedChunk(state, data); };
  auto status = co_await ex.ReadBodyChunks(sink, kChunkBytes);
  if (status) {
    bridge.Finish();
  } else {
    bridge.Abort(status.error());
  }
  co_return status;
}

}  // namespace

Task<void> GetTar(Exchange& ex, ApiContext& ctx, const FileRequest& req) {
  auto opened = co_await RunAs(ctx, req.user, [&] { return fs::OpenForRead(req.path); });
  if (!opened) {
    co_await ex.SendError(opened.error());
    co_return;
  }
  if (!S_ISDIR(opened->st.st_mode)) {
    co_await ex.SendError(
        {ErrorCode::kFailedPrecondition, fmt::format("{} is not a directory", req.path)});
    co_return;
  }
  opened->fd.reset();
  auto executor = co_await boost::asio::this_coro::executor;
  auto bridge = ChunkBridge::Create(executor, kBridgeBytes, ctx.options.server.io_timeout);
  if (!co_await ex.BeginChunked(status::ok, "application/x-tar")) co_return;

  auto [made, sent] = co_await (ProduceTar(ctx, req, *bridge) && SendTarChunks(ex, *bridge));
  if (!made || !sent) {
    // Mid-stream: cut the connection so the client sees an incomplete archive, not a short one.
    Error error = !made ? made.error() : sent.error();
    co_await ex.SendError(error);
    co_return;
  }
  co_await ex.EndChunked();
}

Task<void> PutTar(Exchange& ex, ApiContext& ctx, const FileRequest& req) {
  auto made = co_await RunAs(ctx, req.user, [&] { return fs::MakeDirs(req.path, 0755); });
  if (!made) {
    co_await ex.SendError(made.error());
    co_return;
  }
  auto executor = co_await boost::asio::this_coro::executor;
  auto bridge = ChunkBridge::Create(executor, kBridgeBytes, ctx.options.server.io_timeout);

  auto [stats, fed] = co_await (ExtractFromBridge(ctx, req, *bridge) && FeedBridge(ex, *bridge));
  if (!stats) {
    co_await ex.SendError(stats.error());
    co_return;
  }
  protocol::TarResult result;
  result.entries = stats->entries;
  result.bytes = stats->bytes;
  nlohmann::json body = protocol::ToJson(result);
  co_await ex.SendJson(status::ok, body);
}

}  // namespace berth::agent::files
