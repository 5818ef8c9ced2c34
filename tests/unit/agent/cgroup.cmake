# agent/cgroup: pure parsers on v1 and v2 samples, and real cgroups on this machine (skipped with
# a warning when not root or when no usable cgroup controllers are mounted).
add_executable(yard_cgroup_tests ${CMAKE_CURRENT_LIST_DIR}/cgroup_text_test.cpp
               ${CMAKE_CURRENT_LIST_DIR}/cgroup_groups_test.cpp ${CMAKE_CURRENT_LIST_DIR}/cgroup_limits_test.cpp)
target_link_libraries(yard_cgroup_tests PRIVATE yard_agent_cgroup yard_test_main)
catch_discover_tests(yard_cgroup_tests EXTRA_ARGS --warn NoTests PROPERTIES LABELS unit)
