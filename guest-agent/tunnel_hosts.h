// Which hosts a tunnel may reach: the guest's own loopback and its own interface addresses,
// nothing else. The agent is never a proxy to the outside or to other machines.
#pragma once

#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "common/error.h"

namespace berth::agent {

// The addresses of the guest's interfaces (getifaddrs), IPv6 link-local ones with their scope.
std::vector<boost::asio::ip::address> InterfaceAddresses();

// Pure: `host` as given in ?host= ("" and "localhost" mean 127.0.0.1; IPv6 may be bracketed)
// checked against the guest's own addresses `own`. invalid_argument for anything that is not
// a numeric address (no name lookups: a name could resolve anywhere), permission_denied for an
// address that is neither loopback nor in `own`. IPv4-mapped IPv6 addresses count as IPv4.
Result<boost::asio::ip::address> TunnelAddress(std::string_view host,
                                               const std::vector<boost::asio::ip::address>& own);

}  // namespace berth::agent
