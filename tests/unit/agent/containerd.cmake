# The containerd client against a real containerd the test starts (temp root, state and
# socket; the CRI plugin off), when the containerd client is built.
if(TARGET yard_agent_containerd)
  add_executable(yard_containerd_tests ${CMAKE_CURRENT_LIST_DIR}/containerd_test.cpp)
  target_include_directories(yard_containerd_tests PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(yard_containerd_tests PRIVATE yard_agent_containerd yard_test_main)
  catch_discover_tests(yard_containerd_tests TEST_PREFIX "containerd:" EXTRA_ARGS --warn NoTests PROPERTIES LABELS unit)
endif()
