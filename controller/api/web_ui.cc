#include "controller/api/web_ui.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "common/unique.h"

namespace berth::api {
namespace {

using http::bhttp::field;
using http::bhttp::status;
using http::bhttp::verb;

// No file of a UI is near this; a bigger one is a mistake in the build, not something to send.
constexpr off_t kMaxFile = 64 << 20;
constexpr size_t kChunk = 64 * 1024;

std::string_view ContentType(std::string_view name) {
  auto dot = name.rfind('.');
  std::string_view ext = dot == std::string_view::npos ? "" : name.substr(dot + 1);
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js" || ext == "mjs") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "json" || ext == "map") return "application/json";
  if (ext == "webmanifest") return "application/manifest+json";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  if (ext == "woff2") return "font/woff2";
  if (ext == "woff") return "font/woff";
  if (ext == "ttf") return "font/ttf";
  if (ext == "wasm") return "application/wasm";
  if (ext == "txt") return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

// The path's segments if each is one a built UI can have: no empty ones (but a trailing
// slash), no ".", "..", dot files, NUL or backslash. nullopt otherwise.
std::optional<std::vector<std::string_view>> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  if (!path.starts_with('/')) return std::nullopt;
  path.remove_prefix(1);
  while (!path.empty()) {
    auto slash = path.find('/');
    std::string_view seg = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (seg.empty()) {
      if (path.empty()) break;  // a trailing slash
      return std::nullopt;
    }
    if (seg.front() == '.' || seg.find('\0') != std::string_view::npos ||
        seg.find('\\') != std::string_view::npos || seg.size() > 255) {
      return std::nullopt;
    }
    out.push_back(seg);
  }
  return out;
}

struct Opened {
  UniqueFd fd;
  struct stat st{};
};

// Opens `rel` under `root` as a regular file, following no symbolic link at any step: the
// built tree has none, and one would be the only way out of the root.
std::optional<Opened> OpenUnder(const std::filesystem::path& root, const std::vector<std::string>& rel) {
  UniqueFd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return std::nullopt;
  for (size_t i = 0; i < rel.size(); ++i) {
    bool last = i + 1 == rel.size();
    int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (last ? O_NONBLOCK : O_DIRECTORY);
    UniqueFd next(::openat(dir.get(), rel[i].c_str(), flags));
    if (!next) return std::nullopt;
    dir = std::move(next);
  }
  Opened out;
  if (::fstat(dir.get(), &out.st) != 0 || !S_ISREG(out.st.st_mode) || out.st.st_size > kMaxFile) {
    return std::nullopt;
  }
  out.fd = std::move(dir);
  return out;
}

bool AcceptsGzip(std::string_view accept_encoding) {
  // Enough of RFC 9110's grammar: "gzip" listed and not refused with q=0.
  auto at = accept_encoding.find("gzip");
  if (at == std::string_view::npos) return false;
  auto rest = accept_encoding.substr(at + 4);
  auto comma = rest.find(',');
  auto params = rest.substr(0, comma);
  return params.find("q=0") == std::string_view::npos || params.find("q=0.") != std::string_view::npos;
}

http::Task<void> SendText(http::Exchange& ex, status code, std::string text) {
  http::bhttp::response<http::bhttp::string_body> res{code, ex.request().version()};
  res.set(field::content_type, "text/plain; charset=utf-8");
  res.set("Content-Security-Policy", WebUi::ContentSecurityPolicy());
  res.set("X-Content-Type-Options", "nosniff");
  res.set(field::cache_control, "no-cache");
  if (ex.method() != verb::head) res.body() = std::move(text);
  co_await ex.Send(std::move(res));
}

}  // namespace

WebUi::WebUi(std::filesystem::path root) {
  if (root.empty()) return;
  std::error_code ec;
  auto canonical = std::filesystem::canonical(root, ec);
  root_ = ec ? root : canonical;
}

const std::string& WebUi::ContentSecurityPolicy() {
  // connect-src 'self' covers the page's WebSockets (ws: and wss: to its own host, CSP 3).
  // Styles may be inline: xterm.js and noVNC set them from script; no script may be.
  static const std::string kPolicy =
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
      "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
      "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
  return kPolicy;
}

bool WebUi::Serves(http::Exchange& ex) const {
  if (ex.method() != verb::get && ex.method() != verb::head) return false;
  const auto& p = ex.path();
  return !(p == "/v1" || p.starts_with("/v1/") || p == "/mcp" || p.starts_with("/mcp/"));
}

http::Task<void> WebUi::Serve(http::Exchange& ex) const {
  auto segments = Segments(ex.path());
  if (!segments) {
    co_await SendText(ex, status::not_found, "not found\n");
    co_return;
  }
  if (root_.empty()) {
    if (segments->empty()) {
      co_await SendText(ex, status::ok,
                        "berthd is running, but its web UI was not built: scripts/setup builds it "
                        "(web/dist), and berthd's config names it (\"web_root\").\n");
    } else {
      co_await SendText(ex, status::not_found, "not found (the web UI was not built)\n");
    }
    co_return;
  }
  bool asset = !segments->empty() && (*segments)[0] == "assets";
  std::vector<std::string> rel(segments->begin(), segments->end());
  auto file = rel.empty() ? std::nullopt : OpenUnder(root_, rel);
  if (!file) {
    // A hashed asset that is not there is a 404, never the page (a script tag would run HTML).
    // Any other path is one of the page's own routes.
    if (asset) {
      co_await SendText(ex, status::not_found, "not found\n");
      co_return;
    }
    rel = {"index.html"};
    file = OpenUnder(root_, rel);
    if (!file) {
      std::string why = fmt::format("the web UI's index.html is missing from {}\n", root_.string());
      co_await SendText(ex, status::internal_server_error, why);
      co_return;
    }
  }
  std::string_view type = ContentType(rel.back());
  std::vector<std::pair<std::string, std::string>> headers = {
      {"Content-Security-Policy", ContentSecurityPolicy()},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"Cache-Control", asset ? "public, max-age=31536000, immutable" : "no-cache"},
  };
  if (!asset) {
    // Revalidation of the page: an unchanged index.html is a 304.
    std::string etag = fmt::format("\"{:x}-{:x}\"", file->st.st_size, file->st.st_mtim.tv_sec * 1000000000LL + file->st.st_mtim.tv_nsec);
    headers.emplace_back("ETag", etag);
    if (ex.header(field::if_none_match) == etag) {
      http::bhttp::response<http::bhttp::string_body> res{status::not_modified, ex.request().version()};
      for (const auto& [k, v] : headers) res.insert(k, v);
      co_await ex.Send(std::move(res));
      co_return;
    }
  }
  headers.emplace_back("Vary", "Accept-Encoding");
  if (AcceptsGzip(ex.header(field::accept_encoding))) {
    auto gz = rel;
    gz.back() += ".gz";
    if (auto zipped = OpenUnder(root_, gz)) {
      file = std::move(zipped);
      headers.emplace_back("Content-Encoding", "gzip");
    }
  }
  auto size = static_cast<uint64_t>(file->st.st_size);
  if (!co_await ex.BeginFixed(status::ok, type, size, headers)) co_return;
  if (ex.method() == verb::head) co_return;
  std::string buf(kChunk, '\0');
  uint64_t sent = 0;
  while (sent < size) {
    // Small files on a local disk: a read does not block long enough to matter.
    ssize_t n = ::pread(file->fd.get(), buf.data(), std::min<uint64_t>(kChunk, size - sent),
                        static_cast<off_t>(sent));
    if (n <= 0) {
      // Shorter than it was a moment ago (a rebuild replaced it): end the connection, since the
      // length promised cannot be kept.
      ex.set_keep_alive(false);
      co_return;
    }
    if (!co_await ex.WriteRaw(std::string_view(buf.data(), static_cast<size_t>(n)))) co_return;
    sent += static_cast<uint64_t>(n);
  }
}

}  // namespace berth::api
