// The operator's side of previews: the "preview" object of berthd's config file.
//   {"domain": "preview.localhost", "listen": "127.0.0.1:8421", "scheme": "http",
//    "url_port": 0, "default_ttl": "24h", "max_ttl": "30d"}
// and, for https without a proxy in front, a wildcard certificate for *.{domain} and its key:
//   {"domain": "preview.example.com", "listen": "0.0.0.0:443",
//    "tls_cert": "/etc/berth/preview.pem", "tls_key": "/etc/berth/preview.key"}
// Two ways to serve previews on https, then:
//  - berthd's own TLS: tls_cert and tls_key (both or neither; they need "listen", which then
//    speaks TLS only: common/http/tls_front.h). Links say https and that listener's port
//    unless scheme or url_port say otherwise; a renewed certificate is read without a restart.
//  - an operator's TLS proxy in front of a plain listener: "scheme": "https" and the proxy's
//    "url_port" (443: no port in the links).
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
  // wildcard DNS record (and, for https, a wildcard certificate: tls_cert, or on the proxy in
  // front).
  std::string domain = "preview.localhost";
  // A listener of their own for previews (host:port), besides berthd's main listener, which
  // serves them too (routed by Host). Empty: none.
  std::string listen;
  // What the links berthd hands out say, as the operator set it: "https" when a TLS proxy
  // fronts berthd. Empty (not set): LinkScheme()'s default.
  std::string scheme;
  // The port in the links: 0 is the listener's (the preview listener when there is one);
  // the scheme's default port (80, 443) is left out of the link.
  int url_port = 0;
  // PEM files: a certificate for *.{domain} (its chain may follow it) and its unencrypted key.
  // Set, the preview listener speaks TLS only. Both or neither, and only with `listen`.
  std::string tls_cert;
  std::string tls_key;
  // How long a preview lasts when its creator does not say, and the most it may ask.
  std::chrono::seconds default_ttl{24 * 3600};
  std::chrono::seconds max_ttl{30 * 24 * 3600};

  // berthd ends TLS itself on the preview listener.
  bool tls() const { return !tls_cert.empty(); }
  // The operator said previews are reached over https (a TLS proxy in front of a plain
  // listener, or said so with tls): requests are taken for https whatever the connection they
  // came on, as well as the ones berthd decrypted itself (http::Exchange::secure()).
  bool https() const { return scheme == "https"; }
  // The links' scheme: `scheme` when set, else https with tls, http without.
  std::string LinkScheme() const { return !scheme.empty() ? scheme : tls() ? "https" : "http"; }
};

// The "preview" object; unknown keys and bad values are invalid_argument errors, naming the key.
Result<PreviewConfig> ParsePreviewConfig(const nlohmann::json& j);
// The rules between fields (ParsePreviewConfig applies them; berthd again, for a config built
// in code): tls_cert and tls_key both or neither, and with listen; default_ttl within max_ttl.
Status CheckPreviewConfig(const PreviewConfig& config);

}  // namespace berth::preview
