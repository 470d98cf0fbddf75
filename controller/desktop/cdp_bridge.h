// One DevTools client's bridge (`GET …/desktop/cdp…`, a WebSocket): the client's WebSocket
// (Playwright's connectOverCDP, Puppeteer's connect) and berthd's own WebSocket to Chrome's
// DevTools endpoint in the guest, through the agent's tunnel to the guest port.
//
// Contracts:
//  - Chrome -> client: messages pass untouched, as text, each at most kMaxCdpServerMessage.
//    At most one write to the client in flight (berthd's refusals share it, see below); a
//    slow client stalls the reads from Chrome, nothing grows.
//  - client -> Chrome: every message is parsed (ParseCdpCall); one that is not a call ends the
//    bridge (close 1008 with the reason). While a person holds control, a page-changing call
//    (CdpMethodChangesPage) is not sent: berthd answers it as Chrome would, with an error
//    saying who holds control since when (CdpRefusal). Input that passes while the agent holds
//    control is counted as the agent's input burst on the timeline.
//  - a private takeover ends the bridge at its next message in either direction (1008): no
//    page content reaches the client while a person types a secret, and nothing of the
//    client's reaches the page. The client connects again after the hand-back.
//  - either side ending ends both: Chrome's close or failure closes the client's WebSocket
//    (1000 when Chrome closed normally), a client that closes or fails closes Chrome's.
// Call on the executor that owns both WebSockets (the HTTP connection's strand); they must
// outlive the call.
#pragma once

#include <cstdint>
#include <string>

#include "common/http/types.h"
#include "controller/desktop/desktop_service.h"

namespace berth::desktop {

struct CdpClient {
  std::string workspace_id;
  std::string by;  // the key id it acts for
};

struct CdpStats {
  uint64_t calls = 0;     // client calls parsed
  uint64_t refused = 0;   // answered by berthd: a person held control
  uint64_t to_client = 0; // messages from Chrome passed on
  std::string error;      // why the bridge ended early, if it did
};

http::Task<CdpStats> BridgeCdp(http::WebSocket& client, http::WebSocket& chrome, const CdpClient& who,
                               DesktopService& desktop);

}  // namespace berth::desktop
