#include "controller/preview/preview_config.h"

#include <fmt/format.h>

#include "common/duration.h"
#include "controller/preview/preview_host.h"

namespace berth::preview {
namespace {

Error Invalid(std::string message) { return Error(ErrorCode::kInvalidArgument, std::move(message)); }

Result<std::chrono::seconds> Ttl(const nlohmann::json& v, std::string_view key) {
  if (!v.is_string()) return Fail(Invalid(fmt::format("'preview.{}' must be a duration such as \"24h\"", key)));
  auto d = ParseDuration(v.get<std::string>());
  if (!d || d->count() < 60) {
    return Fail(Invalid(fmt::format("'preview.{}' must be a duration of at least a minute, such as \"24h\"", key)));
  }
  return std::chrono::duration_cast<std::chrono::seconds>(*d);
}

}  // namespace

Result<PreviewConfig> ParsePreviewConfig(const nlohmann::json& j) {
  if (!j.is_object()) return Fail(Invalid("'preview' must be an object"));
  PreviewConfig c;
  for (const auto& [k, v] : j.items()) {
    if (k == "domain") {
      if (!v.is_string()) return Fail(Invalid("'preview.domain' must be a string"));
      c.domain = v.get<std::string>();
      if (auto s = ValidatePreviewDomain(c.domain); !s) return Fail(s.error());
    } else if (k == "listen") {
      if (!v.is_string()) return Fail(Invalid("'preview.listen' must be a string (host:port)"));
      c.listen = v.get<std::string>();
    } else if (k == "scheme") {
      if (!v.is_string() || (v != "http" && v != "https")) {
        return Fail(Invalid("'preview.scheme' must be \"http\" or \"https\""));
      }
      c.scheme = v.get<std::string>();
    } else if (k == "tls_cert" || k == "tls_key") {
      if (!v.is_string() || v.get<std::string>().empty()) {
        return Fail(Invalid(fmt::format("'preview.{}' must be the path of a PEM file", k)));
      }
      (k == "tls_cert" ? c.tls_cert : c.tls_key) = v.get<std::string>();
    } else if (k == "url_port") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 65535) {
        return Fail(Invalid("'preview.url_port' must be a port (0: the listener's)"));
      }
      c.url_port = v.get<int>();
    } else if (k == "default_ttl") {
      auto t = Ttl(v, k);
      if (!t) return Fail(t.error());
      c.default_ttl = *t;
    } else if (k == "max_ttl") {
      auto t = Ttl(v, k);
      if (!t) return Fail(t.error());
      c.max_ttl = *t;
    } else {
      return Fail(Invalid(fmt::format(
          "unknown key 'preview.{}' (domain, listen, scheme, url_port, tls_cert, tls_key, "
          "default_ttl, max_ttl)",
          k)));
    }
  }
  if (auto s = CheckPreviewConfig(c); !s) return Fail(s.error());
  return c;
}

Status CheckPreviewConfig(const PreviewConfig& c) {
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    return Fail(Invalid(c.tls_cert.empty()
                            ? "'preview.tls_key' needs 'preview.tls_cert', the certificate it is the key of"
                            : "'preview.tls_cert' needs 'preview.tls_key', the certificate's private key"));
  }
  if (c.tls() && c.listen.empty()) {
    return Fail(Invalid("'preview.tls_cert' and 'preview.tls_key' need 'preview.listen': berthd's TLS is "
                        "served on the preview listener of its own (host:port)"));
  }
  if (c.default_ttl > c.max_ttl) return Fail(Invalid("'preview.default_ttl' is longer than 'preview.max_ttl'"));
  return Status{};
}

}  // namespace berth::preview
