# Store benchmark: durable job inserts per second, 1 writer vs many (group commit).
# Included from tests/CMakeLists.txt; a program that prints numbers, not a ctest test.
add_executable(yard_store_bench ${CMAKE_CURRENT_LIST_DIR}/store_bench.cpp)
target_link_libraries(yard_store_bench PRIVATE yard_store)
