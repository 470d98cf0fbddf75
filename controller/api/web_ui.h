// The web UI's files (web/, built by scripts/setup into web/dist), served by berthd under "/"
// (DESIGN.md, "Web UI"). A GET or HEAD of any path outside /v1/ and /mcp is the UI's:
//   /assets/…      Vite's content-hashed files: cached for a year, immutable
//   a file in dist anything else in the build (favicon, …): revalidated each time
//   anything else  index.html, revalidated each time, so that the page's own routes
//                  (/w/NAME/terminal) survive a reload
// Every answer carries a content security policy that allows no inline script and no other
// origin, and refuses to be framed. A file NAME.gz beside NAME is sent instead to a client that
// accepts gzip. Paths are checked before the file system sees them (no "..", no dot files, no
// symbolic link out of the root), and only regular files are served.
#pragma once

#include <filesystem>
#include <string>

#include "common/http/server.h"

namespace berth::api {

class WebUi {
 public:
  // `root` empty: no UI was built; "/" says so, other paths are 404s.
  explicit WebUi(std::filesystem::path root);

  // Whether `ex` is the UI's (GET or HEAD outside /v1/ and /mcp).
  bool Serves(http::Exchange& ex) const;
  http::Task<void> Serve(http::Exchange& ex) const;

  // The policy sent with every answer (tests read it).
  static const std::string& ContentSecurityPolicy();

 private:
  std::filesystem::path root_;  // canonical, or empty
};

}  // namespace berth::api
