// A fork's identity, applied inside the guest (POST /v1/identity, identity_routes.cc): a
// machine resumed from another's memory holds the parent's hostname, machine-id, MAC and SSH
// host keys until it is told otherwise.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/protocol/identity.h"

namespace berth::agent {

// An SSH host key to make: ssh-keygen -t `type` into `path` (and path.pub).
struct HostKey {
  std::string type;  // ed25519, ecdsa, rsa, dsa
  std::filesystem::path path;
  std::string comment;
};

struct AppliedIdentity {
  protocol::IdentityApplied applied;  // what changed, in order
  std::vector<HostKey> later;         // host keys removed now, to be made after the answer
};

// Applies every field of `request` but the token (the caller swaps it once this succeeds),
// under `root`: "/" in a guest, where the hostname is also set in the kernel and the MAC on
// the NIC; any other directory (an agent on a host) gets the files only. Every SSH host key
// there was is removed; the quick types are made again now, the slow ones (RSA) are left in
// `later` for GenerateHostKeys once the answer is out. Blocks: off the I/O thread.
Result<AppliedIdentity> ApplyIdentity(const protocol::IdentityRequest& request, const std::string& root);

// Makes `keys` with ssh-keygen, then (in a guest) has sshd load them. Blocks for as long as
// the key generation takes (seconds for RSA under TCG).
Status GenerateHostKeys(const std::vector<HostKey>& keys, bool guest);

}  // namespace berth::agent
