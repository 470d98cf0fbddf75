// What berthd itself answers on a preview host (never the app): a refusal, the page shown while
// a workspace wakes, the one for a port where nothing listens, and a public preview's
// interstitial. A browser (it accepts text/html) gets a small self-contained HTML page; an API
// client the same as berthd's JSON error, with Retry-After where waiting helps.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/http/server.h"

namespace berth::preview {

struct Page {
  http::bhttp::status status = http::bhttp::status::ok;
  std::string title;
  std::string html;      // the page's body, already escaped (Html() for text)
  std::string code;      // the JSON error's code (e.g. "unauthenticated"); empty: no JSON form
  std::string message;   // the JSON error's message, and the page's text when html is empty
  std::optional<int> refresh_s;       // the browser reloads after this
  std::optional<int> retry_after_s;   // Retry-After for API clients (and browsers)
  std::vector<std::pair<std::string, std::string>> headers;  // Set-Cookie, Location, ...
};

// `text` escaped for HTML.
std::string Html(std::string_view text);

// Whether the client reads pages (a browser): its Accept names text/html.
bool WantsHtml(const http::Exchange& ex);

// Sends `page` as HTML or JSON (see above); never cached (Cache-Control: no-store). The
// client may be gone: nothing is reported.
http::Task<void> SendPage(http::Exchange& ex, Page page);

// A refusal of `error` (its code's status).
Page ErrorPage(const Error& error);

}  // namespace berth::preview
