# Ports, TCP tunnels, keep-awake leases and activity (owner: ports area).
berth_add_test(unit_ports SOURCES unit/ports_proc_test.cc unit/ports_activity_test.cc
               LABELS unit)
berth_add_test(integration_ports SOURCES integration/ports_tunnel_test.cc
               integration/ports_tunnel_raw_test.cc LABELS integration)
berth_add_test(integration_activity SOURCES integration/activity_leases_test.cc
               LABELS integration)
# The keepawake tests run the real binary against the in-process agent.
target_compile_definitions(integration_activity PRIVATE
                           BERTH_AGENT_BIN="$<TARGET_FILE:berth-agent>")
add_dependencies(integration_activity berth-agent)
