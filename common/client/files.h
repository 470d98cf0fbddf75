// Typed client functions for the files API, on top of ApiClient. `scope` is the API prefix:
// "/v1" against berth-agent, "/v1/workspaces/{id}" against berthd (which mirrors the agent's
// API). Remote paths are absolute guest paths; they are percent-encoded here. Every function
// blocks the calling thread; bodies of any size stream with bounded memory.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/client/api_client.h"
#include "common/error.h"
#include "common/protocol/files.h"

namespace berth::client {

// Called with the bytes moved so far (and the total when known).
using ProgressFn = std::function<void(uint64_t done, std::optional<uint64_t> total)>;

struct FileCallOptions {
  FileCallOptions() = default;
  std::string user;  // ?user=; empty: the server's default user
};

struct UploadOptions {
  UploadOptions() = default;
  std::string user;
  std::optional<uint32_t> mode;  // default: the existing file's mode, else 0644
  bool overwrite = true;         // false: already_exists when the target exists
  ProgressFn progress;
};

struct DownloadOptions {
  DownloadOptions() = default;
  std::string user;
  ProgressFn progress;
};

// The target for a files call, e.g. FilesTarget("/v1", "/etc/hosts", {{"stat", "1"}}, "root").
std::string FilesTarget(std::string_view scope, std::string_view path,
                        const std::vector<std::pair<std::string, std::string>>& query = {},
                        std::string_view user = {});

// PUT: streams `source` (length known: Content-Length, else chunked) to `remote_path`,
// atomically replacing it. Returns the new file's stat.
Result<protocol::FileInfo> Upload(ApiClient& client, std::string_view scope,
                                  const std::string& remote_path, const BodySource& source,
                                  std::optional<uint64_t> length, const UploadOptions& options = {});
// PUT of bytes in memory. Unlike a streamed upload it can be sent again, so a workspace that
// berthd answers as waking (503, Retry-After) is waited for (ClientOptions::retry_unavailable).
Result<protocol::FileInfo> UploadBytes(ApiClient& client, std::string_view scope,
                                       const std::string& remote_path, std::string_view data,
                                       const UploadOptions& options = {});
// PUT of a local file.
Result<protocol::FileInfo> UploadFile(ApiClient& client, std::string_view scope,
                                      const std::string& local_path, const std::string& remote_path,
                                      const UploadOptions& options = {});

// GET of a remote file's contents into `sink`.
Status Download(ApiClient& client, std::string_view scope, const std::string& remote_path,
                const BodySink& sink, const DownloadOptions& options = {});
// GET into a local file, written to a temporary next to it and renamed into place when
// complete (a failed download leaves the old file, if any).
Status DownloadFile(ApiClient& client, std::string_view scope, const std::string& remote_path,
                    const std::string& local_path, const DownloadOptions& options = {});

Result<protocol::FileInfo> Stat(ApiClient& client, std::string_view scope, const std::string& path,
                                const FileCallOptions& options = {});
Result<protocol::DirListing> List(ApiClient& client, std::string_view scope,
                                  const std::string& path, const FileCallOptions& options = {});
Result<protocol::FileInfo> Mkdir(ApiClient& client, std::string_view scope,
                                 const std::string& path, bool parents = false,
                                 std::optional<uint32_t> mode = std::nullopt,
                                 const FileCallOptions& options = {});
Result<protocol::FileInfo> Move(ApiClient& client, std::string_view scope, const std::string& from,
                                const std::string& to, bool overwrite = false,
                                const FileCallOptions& options = {});
Status Remove(ApiClient& client, std::string_view scope, const std::string& path,
              bool recursive = false, const FileCallOptions& options = {});

// Streams the local directory `local_dir` as a tar (produced by libarchive on a helper thread
// as it is sent) and extracts it into `remote_dir` (created if missing).
Result<protocol::TarResult> UploadTar(ApiClient& client, std::string_view scope,
                                      const std::string& local_dir, const std::string& remote_dir,
                                      const UploadOptions& options = {});
// Streams the remote directory as a tar and extracts it into `local_dir` (created if missing)
// as it arrives, with the same refusals as the server (nothing lands outside `local_dir`) and
// the host's defaults of tar::ExtractOptions: set-id bits cleared, FIFOs left out (counted in
// `skipped`), device nodes refused, ownership never restored, even when run as root.
Result<protocol::TarResult> DownloadTar(ApiClient& client, std::string_view scope,
                                        const std::string& remote_dir, const std::string& local_dir,
                                        const DownloadOptions& options = {});

// Follows changes in a remote directory. `on_event` gets every event but keepalives; it
// returns false to stop watching (then Watch returns success). Returns when the stream ends
// (the directory was removed), on an error, or when told to stop.
Status Watch(ApiClient& client, std::string_view scope, const std::string& dir, bool recursive,
             const std::function<bool(const protocol::WatchEvent&)>& on_event,
             const FileCallOptions& options = {});

}  // namespace berth::client
