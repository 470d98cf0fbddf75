# berthd's v1 wire types (common/v1/): JSON both ways, strict parsing of answers.
berth_add_test(unit_v1 NO_AGENT SOURCES unit/v1_wire_test.cc LIBS berth_common LABELS unit)
