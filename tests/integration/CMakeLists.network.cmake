# Guest network isolation against the real kernel, in network namespaces the test makes
# (needs root, nftables and iproute2; no packet leaves the machine).
berth_add_test(integration_network NO_AGENT SOURCES integration/network_isolation_test.cc
               LIBS berth_controller_core berth_netns_lab LABELS integration)
# passt_guest.py: a guest's hand-made frames on a real passt's socket.
target_compile_definitions(integration_network PRIVATE BERTH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# It makes and deletes the host's one `inet berth` nftables table: alone among the host tests
# that scripts/test runs two at a time.
set_tests_properties(integration_network PROPERTIES RESOURCE_LOCK berth_nft_table)
berth_add_test(integration_network_api NO_AGENT SOURCES integration/network_api_test.cc
               LIBS berth_controller_core berth_cli_core berth_mcp LABELS integration)
