// berthd's address as users write it ("http://127.0.0.1:8080") turned into the Endpoint the
// client library dials.
#pragma once

#include <string_view>

#include "common/endpoint.h"
#include "common/error.h"

namespace berth::mcp {

// Accepts "http://HOST[:PORT][/]" (port 80 by default; a host name is resolved once, here),
// and the endpoint forms "tcp:HOST:PORT" and "unix:/path". invalid_argument for anything else,
// https:// included (the client library speaks plain HTTP; put TLS in front of berthd).
Result<Endpoint> ParseBaseUrl(std::string_view url);

}  // namespace berth::mcp
