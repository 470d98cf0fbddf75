# Guest network isolation (controller/network/): policy parsing, the nftables rules (golden
# files), uid allocation, the filtering resolver on loopback sockets.
berth_add_test(unit_network NO_AGENT SOURCES unit/network_policy_test.cc unit/network_rules_test.cc
               unit/resolver_test.cc
               LIBS berth_controller_core LABELS unit)
target_compile_definitions(unit_network PRIVATE BERTH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
