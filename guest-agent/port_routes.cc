#include "guest-agent/services.h"

namespace berth::agent {

void RegisterPortRoutes(http::Router&, Services&) {}

}  // namespace berth::agent
