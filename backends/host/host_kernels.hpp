// The host backend's row kernels: vectorized with Highway, compiled for
// every SIMD target of the architecture (SSE4, AVX2, AVX-512, NEON, ...) and
// dispatched at run time to the best one the CPU has.
//
// A row is read in two passes. The first walks it in L1-sized chunks, each
// read twice while hot (its max, then the sum of exp(x - max)), and combines
// the chunks' (max, sum) pairs online; the second writes the output. A
// softmax row that fits the thread's scratch keeps its exps there, so exp
// runs once an element; a longer row computes them again in the second
// pass and needs no buffer. A row that fits the cache is read from memory
// once. Short rows go two at a time, each step of one beside the other's.
// Arithmetic is float32; chunk sums are added in double, so a 1M-element row
// keeps to the float64 reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "softmax_args.hpp"
#include "softmax_variants.hpp"

namespace duet::host {

// A forward row's (max, sum of exp(x - max)) over a range of its elements,
// or, backward, the range's sum of dy * y (softmax) or of dy (log_softmax).
struct RowPartial {
  float max = -__builtin_inff();
  double sum = 0.0;
  bool nan = false;  // a NaN in the range (forward only)
};

// Softmax rows up to `scratch_elems` long (at most kMaxScratchElems) keep
// their exps in the thread's scratch between the passes, so the second pass
// multiplies instead of calling exp again; the scratch stays with the thread
// for its life, so the caller sizes it to the thread's share of the cache.
constexpr std::int64_t kMaxScratchElems = std::int64_t(1) << 22;

// Rows [row_begin, row_end) of `args`, whole. `stream`: the output is too
// large to stay in cache, so aligned stores bypass it.
void run_rows(const SoftmaxArgs& args, DType dtype, bool backward, std::int64_t row_begin, std::int64_t row_end,
              bool stream, std::int64_t scratch_elems);

// Row `row`, elements [begin, end): the first pass (its partial), then the
// second pass given the whole row's partial, for a row split across threads.
RowPartial row_partial(const SoftmaxArgs& args, DType dtype, bool backward, std::int64_t row, std::int64_t begin,
                       std::int64_t end);
void write_row_range(const SoftmaxArgs& args, DType dtype, bool backward, std::int64_t row, std::int64_t begin,
                     std::int64_t end, const RowPartial& whole_row, bool stream);

// This thread's scratch of at least `floats` floats, kept for the thread's
// life; throws std::bad_alloc when it cannot be had.
float* thread_scratch(std::size_t floats);

// Combines the partials of consecutive ranges of one row.
RowPartial combine(const RowPartial& a, const RowPartial& b);

// The SIMD target the kernels dispatch to now (Highway's name: "AVX3",
// "AVX2", "SSE4", "NEON", "EMU128", ...), and its float lanes.
std::string simd_target_name();
int simd_float_lanes();
// Every target this build compiled the kernels for, best first.
std::string compiled_simd_targets();

}  // namespace duet::host
