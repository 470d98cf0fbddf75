// `berth cp`: files and directories in and out of a workspace. Directories travel as tar
// streams (?archive=tar) with bounded memory; "-" is stdin or stdout. Semantics follow
// `cp -r`: into an existing directory the source keeps its name; "SRC/." copies the contents.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/progress.h"
#include "cli/remote_path.h"
#include "cli/terminal.h"
#include "common/client/files.h"

namespace berth::cli {
namespace {

namespace fs = std::filesystem;

struct CpOptions {
  std::string source;
  std::string destination;
  std::string user;
  bool no_progress = false;
};

// What a copy needs on the remote side: a client and the workspace's scope.
struct Remote {
  client::ApiClient client;
  std::string scope;
};

Result<Remote> Connect(Context& ctx, const std::string& workspace) {
  auto agent = ctx.Connect(workspace);
  if (!agent) return Fail(agent.error());
  return Remote{std::move(agent->client), std::move(agent->scope)};
}

// "dir/." → "dir": the remote side normalises paths itself, but names are taken from here.
std::string StripContents(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.ends_with("/.")) path.resize(path.size() - 2);
  return path.empty() ? "/" : path;
}

// Remote stat; nullopt when the path does not exist.
Result<std::optional<protocol::FileInfo>> RemoteStat(Remote& r, const std::string& path,
                                                     const std::string& user) {
  client::FileCallOptions options;
  options.user = user;
  auto info = client::Stat(r.client, r.scope, path, options);
  if (!info && info.error().code == ErrorCode::kNotFound) return std::nullopt;
  if (!info) return Fail(info.error());
  return *info;
}

uint64_t LocalTreeBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) total += it->file_size(size_ec);
  }
  return total;
}

std::unique_ptr<ProgressBar> MakeBar(Context& ctx, const CpOptions& o, std::string label) {
  bool enabled = ctx.env().stderr_tty && !o.no_progress && !ctx.options().quiet;
  size_t width = WindowSize(2).value_or(protocol::PtySize(80, 24)).cols;
  return std::make_unique<ProgressBar>(ctx.err(), enabled, std::move(label), width);
}

Status Upload(Context& ctx, const CpOptions& o, const CpArg& src, const CpArg& dst) {
  auto remote = Connect(ctx, *dst.workspace);
  if (!remote) return Fail(remote.error());
  client::UploadOptions options;
  options.user = o.user;
  if (src.stdio) {
    client::BodySource source = [](char* buf, size_t size) -> Result<size_t> {
      for (;;) {
        ssize_t n = read(0, buf, size);
        if (n >= 0) return static_cast<size_t>(n);
        if (errno != EINTR) return Fail(ErrnoError(errno, "read stdin"));
      }
    };
    auto put =
        client::Upload(remote->client, remote->scope, dst.path, source, std::nullopt, options);
    if (!put) return Fail(put.error());
    return {};
  }
  struct stat st {};
  if (stat(src.path.c_str(), &st) != 0) return Fail(ErrnoError(errno, src.path));
  bool contents = MeansContents(src.path);
  std::string local = StripContents(src.path);
  auto existing = RemoteStat(*remote, dst.path, o.user);
  if (!existing) return Fail(existing.error());
  bool into_dir = (*existing && (*existing)->type == "dir") || dst.path.ends_with("/");
  if (S_ISDIR(st.st_mode)) {
    if (*existing && (*existing)->type != "dir") {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("{}:{} exists and is not a directory", *dst.workspace, dst.path));
    }
    std::string target = into_dir && !contents ? JoinPath(dst.path, BaseName(local)) : dst.path;
    auto bar = MakeBar(ctx, o, "upload " + BaseName(local));
    uint64_t total = LocalTreeBytes(local);
    options.progress = [&bar, total](uint64_t done, std::optional<uint64_t>) {
      bar->Update(done, total);
    };
    auto put = client::UploadTar(remote->client, remote->scope, local, target, options);
    bar->Finish();
    if (!put) return Fail(put.error());
    return {};
  }
  if (!S_ISREG(st.st_mode)) {
    return Fail(ErrorCode::kInvalidArgument, src.path + " is neither a file nor a directory");
  }
  std::string target = into_dir ? JoinPath(dst.path, BaseName(local)) : dst.path;
  options.mode = static_cast<uint32_t>(st.st_mode & 07777);  // keep executable bits
  auto bar = MakeBar(ctx, o, "upload " + BaseName(local));
  options.progress = bar->Callback();
  auto put = client::UploadFile(remote->client, remote->scope, local, target, options);
  bar->Finish();
  if (!put) return Fail(put.error());
  return {};
}

// Writes a body to stdout as it arrives.
client::BodySink StdoutSink() {
  return [](std::string_view data) -> Status {
    while (!data.empty()) {
      ssize_t n = write(1, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Fail(ErrnoError(errno, "write stdout"));
      data.remove_prefix(static_cast<size_t>(n));
    }
    return {};
  };
}

Status Download(Context& ctx, const CpOptions& o, const CpArg& src, const CpArg& dst) {
  auto remote = Connect(ctx, *src.workspace);
  if (!remote) return Fail(remote.error());
  bool contents = MeansContents(src.path);
  std::string path = StripContents(src.path);
  auto info = RemoteStat(*remote, path, o.user);
  if (!info) return Fail(info.error());
  if (!*info) {
    return Fail(ErrorCode::kNotFound, fmt::format("{}:{} does not exist", *src.workspace, path));
  }
  bool is_dir = (*info)->type == "dir";
  client::DownloadOptions options;
  options.user = o.user;
  if (dst.stdio) {
    ctx.out().flush();
    if (is_dir) {
      // A directory to stdout is its tar stream: `berth cp ws:/dir - | tar x`.
      return remote->client.Stream(
          boost::beast::http::verb::get,
          client::FilesTarget(remote->scope, path, {{"archive", "tar"}}, o.user), {}, nullptr, 0,
          StdoutSink());
    }
    return client::Download(remote->client, remote->scope, path, StdoutSink(), options);
  }
  std::error_code ec;
  bool local_dir = fs::is_directory(dst.path, ec);
  bool into_dir = local_dir || dst.path.ends_with("/");
  if (is_dir) {
    if (fs::exists(dst.path, ec) && !local_dir) {
      return Fail(ErrorCode::kFailedPrecondition,
                  fmt::format("{} exists and is not a directory", dst.path));
    }
    std::string target = into_dir && !contents ? JoinPath(dst.path, BaseName(path)) : dst.path;
    auto bar = MakeBar(ctx, o, "download " + BaseName(path));
    options.progress = bar->Callback();
    auto got = client::DownloadTar(remote->client, remote->scope, path, target, options);
    bar->Finish();
    if (!got) return Fail(got.error());
    if (got->skipped > 0) {
      ctx.err() << fmt::format("berth: {} FIFO{} not copied (the host makes no special files)\n",
                               got->skipped, got->skipped == 1 ? "" : "s");
    }
    return {};
  }
  std::string target = into_dir ? JoinPath(dst.path, BaseName(path)) : dst.path;
  auto bar = MakeBar(ctx, o, "download " + BaseName(path));
  uint64_t total = (*info)->size;
  options.progress = [&bar, total](uint64_t done, std::optional<uint64_t> known) {
    bar->Update(done, known.value_or(total));
  };
  auto got = client::DownloadFile(remote->client, remote->scope, path, target, options);
  bar->Finish();
  if (!got) return Fail(got.error());
  // Keep the remote file's permission bits (an executable stays one), as scp does.
  chmod(target.c_str(), (*info)->mode & 0777);
  return {};
}

Result<int> Copy(Context& ctx, const CpOptions& o) {
  auto src = ParseCpArg(o.source);
  if (!src) return Fail(src.error());
  auto dst = ParseCpArg(o.destination);
  if (!dst) return Fail(dst.error());
  if (src->remote() == dst->remote()) {
    return Fail(ErrorCode::kInvalidArgument,
                src->remote() ? "copy between workspace paths is not supported: use berth exec cp"
                              : "one side must be a workspace path (WS:/path)");
  }
  if (src->stdio && dst->stdio) return Fail(ErrorCode::kInvalidArgument, "cp - - copies nothing");
  auto status = src->remote() ? Download(ctx, o, *src, *dst) : Upload(ctx, o, *src, *dst);
  if (!status) return Fail(status.error());
  return kExitOk;
}

}  // namespace

void AddFileCommands(Builder& b) {
  auto o = std::make_shared<CpOptions>();
  auto* cp = b.Add("cp", "copy files and directories between here and a workspace",
                   [o](Context& ctx) { return Copy(ctx, *o); });
  cp->add_option("source", o->source, "LOCAL, WS:/path or - (stdin)")->required();
  cp->add_option("destination", o->destination, "LOCAL, WS:/path or - (stdout)")->required();
  cp->add_option("-u,--user", o->user, "read and write files as this user in the workspace");
  cp->add_flag("--no-progress", o->no_progress, "no progress bar");
  cp->footer(
      "Examples:\n  berth cp ./src my-ws:/workspace/src     (a directory, as tar)\n"
      "  berth cp my-ws:/workspace/out.log .\n  berth cp my-ws:/workspace/dir - | tar t");
}

}  // namespace berth::cli
