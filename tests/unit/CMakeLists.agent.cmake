# The agent's pure parts: where its token comes from (file, environment, fw_cfg, SMBIOS).
berth_add_test(unit_agent_token SOURCES unit/agent_token_test.cc LABELS unit)
# The diff of a checkpoint (guest-agent/diff.h) on host directories, and its wire types.
berth_add_test(unit_agent_diff SOURCES unit/agent_diff_test.cc LABELS unit)
