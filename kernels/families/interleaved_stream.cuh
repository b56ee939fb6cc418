// interleaved_stream: interleaved rows (interleaved_rows.cuh's layout and
// tiles of lanes) too long for a tile on chip, cut into chunks that any
// block may take, as split_stream cuts plain rows: softmax over dim 0 of a
// [65536, 1024] matrix is 32 line-wide tiles, each a column of 65536 packs
// (8 MiB of f32), far fewer tiles than a GPU has SMs.
//
// A group is one tile of one outer row; its columns of packs are cut into
// chunks_per_row chunks of slots x VPT positions (slots = blocks' threads /
// tile). Work items run over sets of a.tiles_together neighbouring groups
// (the last set may have fewer), chunk by chunk, the set's groups
// alternating, so that the chunks in flight read runs of neighbouring lines
// (decode_visit). Each item is visited twice, from split_stream's ticket
// queue in split_stream's order (pass 1 of items [0, lag), then pass 1 of
// item lag + j and pass 2 of item j alternately, then pass 2 of the last
// lag items), so a chunk is read again about lag chunks of other reads after
// its first read, mostly from L2. Pass 1 reduces the chunk to a (max, sum)
// pair per row of the tile (backward: a sum) and counts it done for its
// group; the group's last pass 1 combines the group's pairs into each row's
// result and counts once more; pass 2 loads its chunk, waits for that count
// and writes. lag = tiles_together x chunks_per_row + the grid (one wave):
// a group's items lie within that many items of each other, so a visit
// waits only on visits with smaller tickets (split_stream.cuh has the
// argument).
//
// A thread (lane, slot) = (t % tile, t / tile) holds VPT packs of its lane,
// positions c = chunk start + slot + k x slots. Its pairs meet the other
// slots' by shuffles inside a warp (a warp holds W / tile slots) and then
// in shared memory across warps, folded by the tile's first threads.
// Grid: one wave of kInterleavedStreamThreads-thread blocks, two an SM. Workspace
// (a.workspace, counters zeroed before each launch): the layout of
// interleaved_stream_* in softmax_args.hpp.
#pragma once

#include "common/family_kernels.cuh"
#include "common/math.cuh"
#include "common/reduce.cuh"
#include "common/storage.cuh"
#include "softmax_args.hpp"

namespace duet::DUET_NS::kernels {

// Each row's (m, s) of this thread's lane folded over the block's slots
// (PAIRS; else the sums s alone); the result is in threads t < tile (slot 0,
// the lane's first thread). `folded` holds a pair per warp and row of the
// tile; it is free again once every thread has passed the caller's next
// barrier.
template <int VEC, bool PAIRS>
__device__ __forceinline__ void fold_slots(float (&m)[VEC], float (&s)[VEC], float2* folded, int tile) {
  constexpr int W = DUET_DEVICE_WARP_SIZE;
  constexpr int kWarps = kInterleavedStreamThreads / W;
  const auto combine = [](float& m0, float& s0, float m1, float s1) {
    if constexpr (PAIRS) {
      combine_pair(m0, s0, m1, s1);
    } else {
      s0 += s1;
    }
  };
  for (int offset = tile; offset < W; offset *= 2) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float om = PAIRS ? __shfl_xor_sync(DUET_FULL_MASK, m[e], offset, W) : 0.0f;
      const float os = __shfl_xor_sync(DUET_FULL_MASK, s[e], offset, W);
      combine(m[e], s[e], om, os);
    }
  }
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / W;
  const int in_warp = tid % W;
  if (in_warp < tile) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) folded[(warp * tile + in_warp) * VEC + e] = make_float2(m[e], s[e]);
  }
  __syncthreads();
  if (tid < tile) {
#pragma unroll 1
    for (int w = 1; w < kWarps; ++w) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float2 p = folded[(w * tile + tid) * VEC + e];
        combine(m[e], s[e], p.x, p.y);
      }
    }
  }
}

// One visit of the queue: ticket t's pass and item, as the group (a tile
// of an outer row: outer row r, its first row i0) and the chunk's first
// position. Thread 0 decodes each ticket into shared memory, so the other
// threads keep none of the queue's arithmetic in registers.
struct StreamVisit {
  std::int64_t group, r, i0, first_col;
  int second;  // 0: pass 1, 1: pass 2, 2: no work left
};

template <int VEC>
__device__ __forceinline__ StreamVisit decode_visit(const SoftmaxArgs& a, std::int64_t t, int chunk_cols) {
  const std::int64_t tile_rows = std::int64_t(a.tile) * VEC;
  const std::int64_t tiles = (a.inner + tile_rows - 1) / tile_rows;
  const std::int64_t groups = a.rows * tiles;
  const std::int64_t chunks = a.chunks_per_row;
  const std::int64_t items = groups * chunks;
  const std::int64_t together = a.tiles_together;
  const std::int64_t lag = together * chunks + gridDim.x < items ? together * chunks + gridDim.x : items;
  StreamVisit v{};
  if (t >= 2 * items) {
    v.second = 2;
    return v;
  }
  std::int64_t item = t;
  if (t >= lag && t < 2 * items - lag) {
    const std::int64_t u = t - lag;
    v.second = static_cast<int>(u & 1);
    item = v.second ? u / 2 : lag + u / 2;
  } else if (t >= lag) {
    v.second = 1;
    item = items - lag + (t - (2 * items - lag));
  }
  // Items run over `together` neighbouring groups (the last set may have
  // fewer), chunk by chunk, the groups alternating.
  const std::int64_t set = item / (together * chunks);
  const std::int64_t in_set = item - set * together * chunks;
  const std::int64_t set_groups = groups - set * together < together ? groups - set * together : together;
  v.group = set * together + in_set % set_groups;
  v.r = v.group / tiles;
  v.i0 = (v.group % tiles) * tile_rows;
  v.first_col = in_set / set_groups * chunk_cols;
  return v;
}

template <class T, int VEC, int VPT, bool BACKWARD>
__global__ void __launch_bounds__(kInterleavedStreamThreads, 2) interleaved_stream_kernel(SoftmaxArgs a) {
  // 16-bit packs of four as two words (Words8), f32's as one 16-byte value.
  using V = std::conditional_t<sizeof(T) == 2 && VEC == 4, Words8, PackWords<T, VEC>>;
  constexpr int W = DUET_DEVICE_WARP_SIZE;
  constexpr int nt = kInterleavedStreamThreads;
  __shared__ float2 folded[nt / W * kInterleavedStreamLanesMax * VEC];
  __shared__ float2 row_results[kInterleavedStreamLanesMax * VEC];
  __shared__ StreamVisit visits[2];
  __shared__ int last_of_group;
  const int tid = static_cast<int>(threadIdx.x);
  const int tile = a.tile;
  const int slots = nt / tile;
  const int lane = tid % tile;
  const int slot = tid / tile;
  // The workspace's parts, computed where used from the arguments: the
  // ticket counter; per group, chunks whose pass 1 is done, + 1 once the
  // rows' results are out; a pair per (group, chunk) and row of its tile;
  // a pair per group and row (the results).
  auto* const next_ticket = static_cast<unsigned long long*>(a.workspace);
  const auto tile_rows = [&] { return std::int64_t(a.tile) * VEC; };
  const auto groups = [&] { return a.rows * ((a.inner + tile_rows() - 1) / tile_rows()); };
  const auto done = [&] { return static_cast<unsigned*>(a.workspace) + 2; };
  const auto partials = [&] {
    return reinterpret_cast<float*>(static_cast<char*>(a.workspace) + interleaved_stream_partials_offset(groups()));
  };
  const auto results = [&] { return partials() + 2 * groups() * a.chunks_per_row * tile_rows(); };
  if (tid == 0) visits[0] = decode_visit<VEC>(a, static_cast<std::int64_t>(atomicAdd(next_ticket, 1ull)), slots * VPT);
  __syncthreads();
  for (int parity = 0;; parity ^= 1) {
    const StreamVisit visit = visits[parity];
    if (visit.second == 2) break;
    const bool second = visit.second != 0;
    // The next ticket is asked for now and decoded after this visit.
    unsigned long long t_next = 0;
    if (tid == 0) t_next = atomicAdd(next_ticket, 1ull);
    const std::int64_t chunks = a.chunks_per_row;
    const std::int64_t group = visit.group;
    const std::int64_t chunk = visit.first_col / (slots * VPT);
    const std::int64_t r = visit.r;
    const std::int64_t i = visit.i0 + std::int64_t(lane) * VEC;
    const bool live = i < a.inner;  // the last tile's spare lanes take part in the folds only
    const std::int64_t first = visit.first_col + slot;
    // Pack k of this thread: position first + k x slots, if below cols.
    const std::int64_t left = live ? a.cols - first : 0;
    const auto valid = [&](int k) { return std::int64_t(k) * slots < left; };
    const T* x = static_cast<const T*>(a.x) + r * a.x_stride + first * a.x_col_stride + i;
    const T* dy = BACKWARD ? static_cast<const T*>(a.dy) + r * a.dy_stride + first * a.dy_col_stride + i : nullptr;
    const std::int64_t x_step = slots * a.x_col_stride;
    const std::int64_t dy_step = BACKWARD ? slots * a.dy_col_stride : 0;
    const auto at = [](const V& pack, int e) { return element<T>(pack, e); };
    // A place past the row holds -inf forward and zeros backward
    // (load_packs_or_neutral; interleaved_rows does the same).
    V v[VPT];
    V g[BACKWARD ? VPT : 1];
    const auto load_chunk = [&](auto hint) {
      load_packs_or_neutral<T, V, VPT, BACKWARD, decltype(hint)::value>(v, g, x, x_step, dy, dy_step, valid);
    };
    float m[VEC], s[VEC];
    if (!second) {
      load_chunk(std::integral_constant<LoadHint, LoadHint::keep>{});
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        m[e] = kNegInf;
        s[e] = 0.0f;
        if constexpr (BACKWARD) {
#pragma unroll
          for (int k = 0; k < VPT; ++k) s[e] += backward_term(at(v[k], e), at(g[k], e), a.log);
        } else {
          online_add<VPT>(m[e], s[e], [&](int k) { return at(v[k], e); });
        }
      }
      fold_slots<VEC, !BACKWARD>(m, s, folded, tile);
      if (tid < tile) {
        float* const mine = partials() + 2 * ((group * chunks + chunk) * tile_rows() + std::int64_t(lane) * VEC);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          mine[2 * e] = m[e];
          mine[2 * e + 1] = s[e];
        }
        __threadfence();  // the pairs are visible device-wide before the count
      }
      __syncthreads();
      if (tid == 0) last_of_group = atomicAdd(&done()[group], 1u) + 1 == static_cast<unsigned>(chunks);
      __syncthreads();
      if (last_of_group) {
        // The group's last: its threads fold every chunk's pairs of their
        // lane, chunk slot, slot + slots, ..., and publish each row's
        // result.
        __threadfence();
        fold_stored_sets<VEC, !BACKWARD>(m, s, partials() + 2 * group * chunks * tile_rows(), chunks, tile_rows(), lane,
                                         slot, slots);
        fold_slots<VEC, !BACKWARD>(m, s, folded, tile);
        if (tid < tile) {
          float* const mine = results() + 2 * (group * tile_rows() + std::int64_t(lane) * VEC);
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            mine[2 * e] = m[e];
            mine[2 * e + 1] = s[e];
          }
          __threadfence();
        }
        __syncthreads();
        if (tid == 0) atomicAdd(&done()[group], 1u);
      }
    } else {
      // The chunk's loads go out before the wait: they do not depend on it.
      load_chunk(std::integral_constant<LoadHint, LoadHint::last_use>{});
      if (tid < W) {
        // Every lane of the first warp waits for the group's results
        // itself, so each has seen the count before it reads them.
        const volatile unsigned* count = done() + group;
        while (*count <= static_cast<unsigned>(chunks)) {
        }
        __threadfence();
        if (tid < tile) {
          const volatile float* p = results() + 2 * (group * tile_rows() + std::int64_t(tid) * VEC);
#pragma unroll
          for (int e = 0; e < VEC; ++e) row_results[tid * VEC + e] = make_float2(p[2 * e], p[2 * e + 1]);
        }
      }
      __syncthreads();
      T* const out = static_cast<T*>(a.out) + r * a.out_stride + first * a.out_col_stride + i;
      const std::int64_t out_step = slots * a.out_col_stride;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float2 rr = row_results[lane * VEC + e];
        m[e] = rr.x;
        s[e] = BACKWARD ? rr.y : (a.log ? logf(rr.y) : 1.0f / rr.y);
      }
#pragma unroll
      for (int k = 0; k < VPT; ++k)
        if (valid(k)) {
          V o;
          if constexpr (BACKWARD)
            o = make_pack<T, V>([&](int e) { return backward_value(at(v[k], e), at(g[k], e), s[e], a.log); });
          else
            o = make_pack<T, V>([&](int e) { return forward_value(at(v[k], e), m[e], s[e], s[e], a.log); });
          store_words(reinterpret_cast<V*>(out + k * out_step), o);
        }
    }
    // Also the barrier between this visit's use of the shared arrays and the
    // next visit's.
    if (tid == 0) visits[parity ^ 1] = decode_visit<VEC>(a, static_cast<std::int64_t>(t_next), slots * VPT);
    __syncthreads();
  }
}

template <int I>
inline constexpr KernelPair kFamilyKernels<Strategy::interleaved_stream, I> = {
    &interleaved_stream_kernel<EntryStorage<I>, kEntry<I>.vec, kEntry<I>.vpt, kEntry<I>.backward>};

}  // namespace duet::DUET_NS::kernels
