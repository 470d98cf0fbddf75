// A DomainSpec read from JSON, for `berthd domain-xml`: tools that boot an image outside a
// workspace (images/lib/vm.sh: images/boot-check and the image e2e tests) get the XML berthd
// itself would define, not a second one of their own.
#pragma once

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/hypervisor/domain_spec.h"

namespace berth::hypervisor {

// Keys are DomainSpec's field names; `accel` is "kvm" | "tcg", `agent_channel` "forward" |
// "vsock". Every key is optional (DomainSpec's defaults) but a key the spec does not have, or
// a value of the wrong type or out of range, is an error naming it.
Result<DomainSpec> DomainSpecFromJson(const nlohmann::json& j);

}  // namespace berth::hypervisor
