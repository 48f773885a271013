# Engine CUDA backend tests (label gpu; they skip without a GPU), included from
# tests/gpu/CMakeLists.txt. The directory's glob already made gpu_<name> for each *_test.cpp
# (linked with the kernel libraries); this adds the engine libraries and the shared helpers
# (engine_test_util.cpp, and the engine tests' in-memory random models).
if(NOT TARGET ceiling_engine_cuda)
  return()
endif()
foreach(name engine_cuda_parity engine_cuda_ops engine_batch engine_tp)
  if(NOT TARGET gpu_${name})
    ceiling_test(gpu_${name} SOURCES ${CMAKE_CURRENT_LIST_DIR}/${name}_test.cpp LABELS gpu
                 TIMEOUT 600)
  endif()
  target_sources(gpu_${name} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/engine_test_util.cpp
                                     ${PROJECT_SOURCE_DIR}/tests/engine/test_models.cpp)
  target_link_libraries(gpu_${name} PRIVATE ceiling_serve ceiling_dist ceiling_engine_cuda ceiling_engine ceiling_model
                        ceiling_tokenizer ceiling_kernels_cpu ceiling_core CUDA::cudart fmt::fmt)
  target_include_directories(gpu_${name} PRIVATE ${CMAKE_CURRENT_LIST_DIR}
                             ${PROJECT_SOURCE_DIR}/tests/engine)
endforeach()
