berth_add_test(integration_libvirt_hypervisor NO_AGENT SOURCES integration/libvirt_hypervisor_test.cc
               LIBS berth_controller_core LABELS integration)
berth_add_test(integration_passt NO_AGENT SOURCES integration/passt_test.cc
               LIBS berth_controller_core LABELS integration)
