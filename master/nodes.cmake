# The node registry and the agent API, part of yard_master_core. Included from
# master/CMakeLists.txt after yard_master_core is defined.
target_sources(yard_master_core PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/nodes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/agent_api.cpp)
