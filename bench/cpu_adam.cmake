# zinc-bench-adam: zinc's CPU AdamW against a STREAM-like triad
# (bench/cpu_adam.cpp; bench/cpu_adam.py adds PyTorch). Included from
# test/CMakeLists.txt; the executable goes to <build>/bench/.
add_executable(zinc-bench-adam ${CMAKE_SOURCE_DIR}/bench/cpu_adam.cpp)
target_link_libraries(zinc-bench-adam PRIVATE zinc_optim OpenMP::OpenMP_CXX)
set_target_properties(zinc-bench-adam PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
