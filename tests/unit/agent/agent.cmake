# The agent's logic with fakes where a fake is enough (the runner's state machine against a
# recording driver; config, capacity and log-tail parsing). The real host driver, shim and
# cgroups are exercised by their own tests and by tests/e2e.
add_executable(yard_agent_tests ${CMAKE_CURRENT_LIST_DIR}/runner_test.cpp ${CMAKE_CURRENT_LIST_DIR}/agent_config_test.cpp
               ${CMAKE_CURRENT_LIST_DIR}/oci_spec_test.cpp ${CMAKE_CURRENT_LIST_DIR}/log_shipper_test.cpp
               ${CMAKE_CURRENT_LIST_DIR}/worker_restarts_test.cpp ${CMAKE_CURRENT_LIST_DIR}/log_cap_test.cpp)
target_include_directories(yard_agent_tests PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(yard_agent_tests PRIVATE yard_agent_core yard_test_main)
target_compile_definitions(yard_agent_tests PRIVATE YARD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
catch_discover_tests(yard_agent_tests TEST_PREFIX "agent:" EXTRA_ARGS --warn NoTests PROPERTIES LABELS unit)
