// Float32 chunk primitives for the host backend's fused operations
// (host_fused.cpp): each runs on the best SIMD target the CPU has (Highway's
// run-time dispatch), over a chunk of values held as float32 in a buffer.
#pragma once

#include <cstdint>

#include "softmax_variants.hpp"

namespace duet::host {

// dst[k] = scale * src[k] in float32, from `dtype` storage.
void load_floats(DType dtype, const void* src, std::int64_t n, float* dst, float scale = 1.0f);

// v[k] += src[k] in float32, from `dtype` storage (an additive mask).
void add_floats(DType dtype, const void* src, std::int64_t n, float* v);

// v[k] = -inf where masked[k] is not 0 (a boolean mask, true = masked out).
void mask_floats(const std::uint8_t* masked, std::int64_t n, float* v);

// dst[k] = src[k] rounded to `dtype` storage (nearest even; a NaN stays a
// quiet NaN). src and dst may be the same memory.
void store_floats(DType dtype, const float* src, std::int64_t n, void* dst);

// The largest of v[0..n), -inf for n = 0. A NaN may or may not show in it
// (Max's NaN rule differs between targets): callers find NaN through the
// exps, which keep it.
float max_floats(const float* v, std::int64_t n);

// v[k] = mul * exp(v[k] - sub) + add, for sub at least every v[k] (a row's
// max): -inf gives add, NaN stays NaN. Returns the sum of the exps (before
// mul and add), each lane's float sum added in double; a NaN among them
// makes it NaN.
double exp_affine(float* v, std::int64_t n, float sub, float mul, float add);

}  // namespace duet::host
