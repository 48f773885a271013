// The CHECK family for CUDA runtime, cuBLAS(Lt) and NCCL calls. Each reports the failing
// statement, file and line. *_CHECK throws ceiling::Error (host code); *_RETURN returns a failed
// ceiling::Status from the enclosing launcher.
#pragma once

#include "core/status.h"

#define CEILING_CHECK_IMPL_(ok, errstr, stmt, on_fail)                                        \
  do {                                                                                        \
    if (!(ok)) on_fail("{} failed: {} ({}:{})", stmt, errstr, __FILE__, __LINE__);            \
  } while (0)

#if defined(__CUDACC__) || defined(CEILING_WITH_CUDA_RUNTIME)
#include <cuda_runtime.h>

#define CEILING_CUDA_CHECK(expr)                                                          \
  do {                                                                                    \
    cudaError_t _e = (expr);                                                              \
    CEILING_CHECK_IMPL_(_e == cudaSuccess, cudaGetErrorString(_e), #expr, ::ceiling::fail); \
  } while (0)

#define CEILING_CUDA_RETURN(expr)                                                   \
  do {                                                                              \
    cudaError_t _e = (expr);                                                        \
    if (_e != cudaSuccess)                                                          \
      return ::ceiling::Status::error("{} failed: {} ({}:{})", #expr,               \
                                      cudaGetErrorString(_e), __FILE__, __LINE__);  \
  } while (0)

// After a kernel launch: checks the launch error (not the kernel's completion).
#define CEILING_CUDA_RETURN_LAST() CEILING_CUDA_RETURN(cudaGetLastError())
#endif

#if defined(CEILING_WITH_CUBLAS)
#include <cublasLt.h>
#include <cublas_v2.h>
#define CEILING_CUBLAS_CHECK(expr)                                                            \
  do {                                                                                        \
    cublasStatus_t _s = (expr);                                                               \
    CEILING_CHECK_IMPL_(_s == CUBLAS_STATUS_SUCCESS, cublasGetStatusString(_s), #expr,        \
                        ::ceiling::fail);                                                     \
  } while (0)
#define CEILING_CUBLAS_RETURN(expr)                                                     \
  do {                                                                                  \
    cublasStatus_t _s = (expr);                                                         \
    if (_s != CUBLAS_STATUS_SUCCESS)                                                    \
      return ::ceiling::Status::error("{} failed: {} ({}:{})", #expr,                   \
                                      cublasGetStatusString(_s), __FILE__, __LINE__);   \
  } while (0)
#endif

#if defined(CEILING_WITH_NCCL)
#include <nccl.h>
#define CEILING_NCCL_CHECK(expr)                                                            \
  do {                                                                                      \
    ncclResult_t _r = (expr);                                                               \
    CEILING_CHECK_IMPL_(_r == ncclSuccess, ncclGetErrorString(_r), #expr, ::ceiling::fail); \
  } while (0)
#endif
