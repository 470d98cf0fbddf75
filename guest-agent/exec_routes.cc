#include "guest-agent/services.h"

namespace berth::agent {

void RegisterExecRoutes(http::Router&, Services&) {}

}  // namespace berth::agent
