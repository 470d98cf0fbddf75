#include "guest-agent/services.h"

namespace berth::agent {

void RegisterFileRoutes(http::Router&, Services&) {}

}  // namespace berth::agent
