# Scheduler benchmark: schedule() on synthetic 1k/10k-node clusters with 10k/100k pending
# gangs; prints medians and ratios against a baseline case of the same run. Included from
# tests/CMakeLists.txt; a program that prints numbers, not a ctest test. Run it from a
# Release build.
add_executable(yard_scheduler_bench ${CMAKE_CURRENT_LIST_DIR}/scheduler_bench.cpp)
target_include_directories(yard_scheduler_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(yard_scheduler_bench PRIVATE yard_scheduler)
# Preemption benchmark: findPreemption() on 1,000 nodes with 10,000 running jobs; prints
# medians. Run it from a Release build.
add_executable(yard_preempt_bench ${CMAKE_CURRENT_LIST_DIR}/preempt_bench.cpp)
target_include_directories(yard_preempt_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(yard_preempt_bench PRIVATE yard_scheduler)
