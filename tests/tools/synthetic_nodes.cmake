# yard-synthetic-nodes stands in for N agents: joins and registers synthetic nodes through
# the agent API (a node certificate each, over TLS) and heartbeats them. Included from
# tests/tools/CMakeLists.txt.
add_executable(yard-synthetic-nodes ${CMAKE_CURRENT_LIST_DIR}/synthetic_nodes.cpp ${CMAKE_CURRENT_LIST_DIR}/node_link.cpp)
target_include_directories(yard-synthetic-nodes PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(yard-synthetic-nodes PRIVATE yard_wire yard_schema yard_spec CLI11::CLI11)
