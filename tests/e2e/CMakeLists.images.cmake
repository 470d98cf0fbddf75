# End-to-end: build the guest images (cached under /var/lib/berth by a hash of their inputs,
# the agent binary included) and boot them under libvirt, KVM when it works, TCG otherwise.
foreach(image base desktop)
  add_test(NAME e2e_image_${image}
           COMMAND ${PROJECT_SOURCE_DIR}/tests/e2e/images/${image}_boot_test.sh)
  set_tests_properties(e2e_image_${image} PROPERTIES
    ENVIRONMENT "BERTH_AGENT_BIN=$<TARGET_FILE:berth-agent>;BERTHD_BIN=$<TARGET_FILE:berthd>"
    TIMEOUT 3600
    SKIP_RETURN_CODE 77
    LABELS e2e
    # Both build into the same image cache and boot VMs: never at the same time.
    RESOURCE_LOCK berth_images)
endforeach()
