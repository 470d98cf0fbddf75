# berthd's v1 wire types (common/v1/): JSON both ways, strict parsing of answers; and the
# controller's answers built from them (controller/api/json.cc).
berth_add_test(unit_v1 NO_AGENT SOURCES unit/v1_wire_test.cc LIBS berth_common LABELS unit)
berth_add_test(unit_api_json NO_AGENT SOURCES unit/api_json_test.cc LIBS berth_controller_core
               LABELS unit)
# The web UI's sessions: cookie parsing, Set-Cookie, Origin and CSRF checks, their config.
berth_add_test(unit_sessions NO_AGENT SOURCES unit/sessions_test.cc LIBS berth_controller_core
               LABELS unit)
# The timeline's events for execs, sessions and file changes through the agent routes.
berth_add_test(unit_agent_events NO_AGENT SOURCES unit/agent_events_test.cc LIBS berth_controller_core
               LABELS unit)
