#include "guest-agent/services.h"

namespace berth::agent {

void RegisterProcessRoutes(http::Router&, Services&) {}

}  // namespace berth::agent
