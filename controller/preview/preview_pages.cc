#include "controller/preview/preview_pages.h"

#include <fmt/format.h>

#include "common/json.h"
#include "common/markup.h"

namespace berth::preview {

namespace bhttp = http::bhttp;

std::string Html(std::string_view text) { return EscapeMarkup(text); }

bool WantsHtml(const http::Exchange& ex) {
  return ex.header(bhttp::field::accept).find("text/html") != std::string_view::npos;
}

http::Task<void> SendPage(http::Exchange& ex, Page page) {
  bhttp::response<bhttp::string_body> res{page.status, ex.request().version()};
  res.set(bhttp::field::cache_control, "no-store");
  for (const auto& [k, v] : page.headers) res.insert(k, v);
  if (page.retry_after_s) res.set(bhttp::field::retry_after, std::to_string(*page.retry_after_s));
  if (WantsHtml(ex) || page.code.empty()) {
    std::string refresh =
        page.refresh_s ? fmt::format("<meta http-equiv=\"refresh\" content=\"{}\">", *page.refresh_s) : "";
    std::string body = page.html.empty() ? fmt::format("<p>{}</p>", Html(page.message)) : page.html;
    res.set(bhttp::field::content_type, "text/html; charset=utf-8");
    // No script, no outside resource: the page works under any CSP and loads nothing.
    res.set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:");
    res.body() = fmt::format(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">{}"
        "<meta name=\"viewport\" content=\"width=device-width\"><link rel=\"icon\" href=\"data:,\">"
        "<title>{}</title>"
        "<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:4em auto;padding:0 1em;"
        "color:#222}}h1{{font-size:1.3em}}code{{background:#f3f3f3;padding:0 .2em}}"
        "a.button{{display:inline-block;padding:.5em 1em;background:#1d4ed8;color:#fff;"
        "text-decoration:none;border-radius:4px}}small{{color:#666}}</style></head>"
        "<body><h1>{}</h1>{}<p><small>Berth preview</small></p></body></html>\n",
        refresh, Html(page.title), Html(page.title), body);
  } else {
    res.set(bhttp::field::content_type, "application/json");
    nlohmann::json j = {{"error", {{"code", page.code}, {"message", page.message}}}};
    res.body() = DumpJson(j) + "\n";
  }
  res.prepare_payload();
  auto sent = co_await ex.Send(std::move(res));
  (void)sent;  // the client may be gone; nothing is left to tell it
}

Page ErrorPage(const Error& error) {
  Page page;
  page.status = static_cast<bhttp::status>(HttpStatus(error.code));
  page.code = std::string(ErrorCodeName(error.code));
  page.message = error.message;
  switch (error.code) {
    case ErrorCode::kUnauthenticated: page.title = "This preview is private"; break;
    case ErrorCode::kPermissionDenied: page.title = "This link does not open this preview"; break;
    case ErrorCode::kInvalidArgument: page.title = "Not a preview address"; break;
    case ErrorCode::kNotFound: page.title = "No such preview"; break;
    default: page.title = "The preview is not available"; break;
  }
  return page;
}

}  // namespace berth::preview
