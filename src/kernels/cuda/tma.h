// TMA tensor maps, host side: cuTensorMapEncodeTiled through the runtime's driver entry point
// (the project links cudart, not libcuda), and the one layout ceiling's sm_90a kernels load — a
// row-major bf16 matrix read in boxes of 64 columns (one 128-byte row of a swizzled panel,
// attention_sm90.cuh) × box_rows rows.
#pragma once

#include <cudaTypedefs.h>  // CUtensorMap, PFN_cuTensorMapEncodeTiled (no libcuda link needed)

#include <cstdint>

#include "core/status.h"

namespace ceiling::cuda {

// Null when the driver lacks it. Resolved once per process.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder();

// The bf16 matrix [rows, cols] at base (row stride ld elements; base 16-byte aligned, ld % 8 == 0)
// as a 2-D TMA tensor: boxes of box_rows (≤ 256) × 64 columns, 128-byte swizzle, elements outside
// the matrix read as zeros. `what` names the matrix in the error.
Status encode_bf16_map(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_rows,
                       CUtensorMap* map, const char* what);

}  // namespace ceiling::cuda
