# berthd's proxy to agents and the one byte pump (owner: proxy area).
berth_add_test(integration_net_pump NO_AGENT SOURCES integration/net_pump_test.cc
               LIBS berth_common LABELS integration)
