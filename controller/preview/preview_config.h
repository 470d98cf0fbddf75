// The operator's side of previews: the "preview" object of berthd's config file.
//   {"domain": "preview.localhost", "listen": "127.0.0.1:8421", "scheme": "http",
//    "url_port": 0, "default_ttl": "24h", "max_ttl": "30d"}
// Pure; any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace berth::preview {

struct PreviewConfig {
  // Previews live at {port}-{workspace}.{domain}. Browsers resolve every *.localhost name to
  // loopback, so the default works on one machine with no DNS; a host serving others needs a
  // wildcard DNS record (and, for https, a wildcard certificate on the proxy in front).
  std::string domain = "preview.localhost";
  // A listener of their own for previews (host:port), besides berthd's main listener, which
  // serves them too (routed by Host). Empty: none.
  std::string listen;
  // What the links berthd hands out say: "https" when a TLS proxy fronts berthd.
  std::string scheme = "http";
  // The port in the links: 0 is the listener's (the preview listener when there is one);
  // the scheme's default port (80, 443) is left out of the link.
  int url_port = 0;
  // How long a preview lasts when its creator does not say, and the most it may ask.
  std::chrono::seconds default_ttl{24 * 3600};
  std::chrono::seconds max_ttl{30 * 24 * 3600};

  bool https() const { return scheme == "https"; }
};

// The "preview" object; unknown keys and bad values are invalid_argument errors.
Result<PreviewConfig> ParsePreviewConfig(const nlohmann::json& j);

}  // namespace berth::preview
