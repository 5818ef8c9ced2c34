# yard-shim tests: option parsing in-process, everything else against the real binary (daemonizing,
# mount namespaces and cgroups only mean something in a real process).
add_executable(yard_shim_tests shim_run_test.cpp shim_mounts_test.cpp shim_lease_test.cpp shim_exec_test.cpp
               shim_guard_test.cpp shim_options_test.cpp no_follow_test.cpp)
target_include_directories(yard_shim_tests PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(yard_shim_tests PRIVATE yard_shim_core yard_test_main)
target_compile_definitions(yard_shim_tests PRIVATE YARD_SHIM="$<TARGET_FILE:yard-shim>")
add_dependencies(yard_shim_tests yard-shim)
catch_discover_tests(yard_shim_tests TEST_PREFIX "shim: " EXTRA_ARGS --warn NoTests PROPERTIES LABELS unit)

# Host replicas run as their owner: the real runner, host driver and yard-shim (no cgroups).
add_executable(yard_host_runas_tests host_runas_test.cpp)
target_include_directories(yard_host_runas_tests PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(yard_host_runas_tests PRIVATE yard_agent_core yard_test_main)
target_compile_definitions(yard_host_runas_tests PRIVATE YARD_SHIM="$<TARGET_FILE:yard-shim>")
add_dependencies(yard_host_runas_tests yard-shim)
catch_discover_tests(yard_host_runas_tests TEST_PREFIX "shim: " EXTRA_ARGS --warn NoTests PROPERTIES LABELS unit TIMEOUT 60)
