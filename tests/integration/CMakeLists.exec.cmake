# Exec, processes and sessions (POST /v1/exec, /v1/processes, /v1/exec/ws).
berth_add_test(integration_exec
               SOURCES integration/exec_run_test.cc integration/exec_process_test.cc
                       integration/exec_session_test.cc
               LABELS integration)
# 50 concurrent streams of 20 MiB: a load test of its own so it can be run (or skipped) alone.
berth_add_test(integration_exec_load
               SOURCES integration/exec_load_test.cc
               LIBS OpenSSL::Crypto
               LABELS integration)
