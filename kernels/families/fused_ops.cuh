// The fused row operations as policies: what one row of each operation
// loads, accumulates, and writes. The strategies (families/fused_rows.cuh)
// decide who holds which packs of a row and how the threads combine their
// partial results; a policy knows nothing of threads.
//
// A policy is built for one row from a column on (Policy op(args, row,
// shift): pack p covers columns shift + p*PACK .. shift + p*PACK + PACK - 1
// of every tensor), or from the same op's policy of another PACK (the same
// row and shift: Scalar(body)), and offers:
//   kSoftmax   the row needs an online (max, sum) pair of its values
//   kSums      plain sums it needs besides (0..2, RowAcc::a and ::b)
//   Elem       the storage type of x's elements (x's packs set a row's head)
//   Item       the packs of one position: x, and dy or a mask pack
//   kItemIsX   (where true) the Item is x's pack alone, load<H> reads it
//              unconditionally from x + p, so a copy of those bytes made
//              elsewhere (stream_row's cp.async stash) is the Item
//   Scalar     the same op's policy on single elements (PACK = 1)
//   load<H>(it, p)          loads pack p of every tensor
//   prepare(it, p)          (where a policy has it) rewrites a loaded Item
//                           into the form accumulate and store read, once
//                           its loads have landed; the strategies call it
//                           once an Item, before its first accumulate, and
//                           again for an Item loaded again (prepare_item)
//   accumulate(acc, it, p)  adds pack p to the thread's RowAcc
//   finish(acc) -> Final    the row's constants, from the combined RowAcc;
//                           Final is the same type for every PACK and
//                           shift, so one row's policies share it
//   writes()                whether the row has an output tensor
//   store<S>(it, p, f)      writes pack p of the output
//   epilogue(f)             per-row scalars (cross-entropy's loss and lse):
//                           one thread of the row calls it, before the
//                           row's stores, so those values need no
//                           registers while the packs are written
// The vector kernels with edges run a row as a body of whole packs at
// aligned addresses (the PACK policy, shifted by the row's head) and the
// elements before and after it through Scalar built from the body's policy
// (its pack p is column shift + p, p negative for the elements before the
// body); both add into the same RowAcc. The other kernels use shift 0.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/math.cuh"
#include "common/storage.cuh"
#include "fused_args.hpp"

namespace duet::DUET_NS::kernels {

// Whether a row's threads combine their partial results: the op keeps an
// online pair or plain sums.
template <class Op>
inline constexpr bool reduces = Op::kSoftmax || Op::kSums > 0;

// A thread's (then a row's) partial results: the online pair (m, s) and
// two plain sums a and b.
struct RowAcc {
  float m = kNegInf;
  float s = 0.0f;
  float a = 0.0f;
  float b = 0.0f;
};

constexpr float kNaN = __builtin_nanf("");

// Cross-entropy's workspace (fused_args.hpp): the two counters, then the
// per-row losses of reductions mean and sum.
__device__ __forceinline__ int* ce_counters(const FusedArgs& a) { return static_cast<int*>(a.workspace); }
__device__ __forceinline__ float* ce_row_losses(const FusedArgs& a) {
  return reinterpret_cast<float*>(static_cast<char*>(a.workspace) + kCrossEntropyCountersBytes);
}

__device__ __forceinline__ std::int64_t target_of(const FusedArgs& a, std::int64_t row) {
  if (a.target_type == IndexType::i32) return static_cast<const std::int32_t*>(a.target)[row * a.target_stride];
  return static_cast<const std::int64_t*>(a.target)[row * a.target_stride];
}

// Row `row` of a tensor with `stride` elements between rows, from column
// `shift` on, as packs of form V.
template <class T, class V>
__device__ __forceinline__ const V* fused_row(const void* base, std::int64_t row, std::int64_t stride,
                                              std::int64_t shift) {
  return reinterpret_cast<const V*>(static_cast<const T*>(base) + row * stride + shift);
}
template <class T, class V>
__device__ __forceinline__ V* fused_row(void* base, std::int64_t row, std::int64_t stride, std::int64_t shift) {
  return reinterpret_cast<V*>(static_cast<T*>(base) + row * stride + shift);
}

template <class V>
__device__ __forceinline__ void store_pack(V* p, const V& v, bool streaming) {
  if (streaming)
    store_streaming(p, v);
  else
    *p = v;
}

struct NoPack {};

// PACK bytes of a boolean mask as whole 32-bit words (a Pack of bytes is
// held a byte a register: eight registers for eight bytes, and spills).
template <int PACK>
struct BoolPackOf {
  using type = std::uint8_t;
};
template <>
struct BoolPackOf<4> {
  using type = unsigned;
};
template <>
struct BoolPackOf<8> {
  using type = uint2;
};
template <int PACK>
using BoolPack = typename BoolPackOf<PACK>::type;

// Byte e of a boolean mask pack, as a word.
__device__ __forceinline__ unsigned mask_byte(std::uint8_t b, int) { return b; }
__device__ __forceinline__ unsigned mask_byte(unsigned w, int e) { return (w >> (8 * e)) & 0xffu; }

// The top bit of each byte of w set where that byte is nonzero (a boolean
// mask's byte is true for any nonzero value): no carry leaves a byte, as
// 0x7f + 0x7f < 0x100.
__device__ __forceinline__ unsigned nonzero_bytes(unsigned w) { return ((w & 0x7f7f7f7fu) + 0x7f7f7f7fu) | w; }

// x's pack of 16-bit T with the elements a boolean mask pack marks replaced
// by `fill` (T's bits in both halves), word by word: a select mask a word
// from the mask bytes' top bits (duet_byte_signs), then one bitwise select.
// Element e of a pack is byte e of the mask.
template <class T, int PACK, class V, class M>
__device__ __forceinline__ V fold_mask(const V& x, const M& mk, unsigned fill) {
  static_assert(sizeof(T) == 2, "16-bit elements, two a word");
  if constexpr (PACK == 1) {
    static_assert(sizeof(M) == 1, "a byte an element");
    if (mk == 0) return x;
    V o;
    o.v[0] = T{static_cast<unsigned short>(fill)};
    return o;
  } else {
    static_assert(std::is_same_v<V, DUET_RAW16> && sizeof(M) == PACK, "16-byte packs of x, a mask byte an element");
    unsigned m[PACK / 4];
    __builtin_memcpy(m, &mk, sizeof(M));
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // Word i of x holds elements 2i and 2i + 1: bytes 2i % 4 and
      // 2i % 4 + 1 of the mask's word i / 2.
      const unsigned s = duet_byte_signs(nonzero_bytes(m[i / 2]), i % 2 ? 0x3322u : 0x1100u);
      w[i] = (DUET_RAW16_WORD(x, i) & ~s) | (fill & s);
    }
    return DUET_RAW16_MAKE(w[0], w[1], w[2], w[3]);
  }
}

// ------------------------------------------------------------ masked softmax
// v = scale * x + mask (additive), -inf where masked (boolean, causal);
// y = softmax(v). A row with every v = -inf gives NaN, or zeros when
// zero_masked_rows. A boolean mask over 16-bit x is folded into x by
// prepare, once a pack: its marked elements become -inf (+inf where the
// scale is negative, so scale * x is -inf either way), and accumulate and
// store read x alone, with no test an element in either pass (16-bit rows
// are issue-bound; float32 rows, memory-bound, keep a byte test an element
// in each pass, which measured faster there: bench/NOTES.md v94). A zero
// scale runs as scale 1 over x * 0 (0, or NaN where x is not finite),
// folded after, since 0 * inf would be NaN. With SHARED (block_row's widest entries,
// fused_mask_in_shared) a mask pack goes from global to shared memory by
// cp.async, pack p of the row at place p of the block's dynamic shared
// memory, and is read there: the Item holds x alone. The kernel waits for
// its copies (wait_mask_copies) before the first accumulate; a thread reads
// only the places it filled, so no barrier orders them, and each place is
// refilled for the next row only after this row's stores, which consume
// every read of it.
struct MaskedSoftmaxFinal {
  float m, inv_s;
  bool dead;
};

template <class T, int PACK, MaskKind MASK, bool SHARED = false>
struct MaskedSoftmaxOp {
  static_assert(!SHARED || MASK == MaskKind::additive || MASK == MaskKind::boolean, "only a mask tensor is copied");
  static constexpr bool kSoftmax = true;
  static constexpr int kSums = 0;
  static constexpr bool kMaskInShared = SHARED;
  using Elem = T;
  using V = PackWords<T, PACK>;
  using MaskPack = std::conditional_t<MASK == MaskKind::additive, V,
                                      std::conditional_t<MASK == MaskKind::boolean, BoolPack<PACK>, NoPack>>;
  using Scalar = MaskedSoftmaxOp<T, 1, MASK>;
  struct ItemWithMask {
    V x;
    MaskPack mk;
  };
  struct ItemWithoutMask {
    V x;
  };
  // No member for a mask that reads nothing: an empty one would still take
  // a stash slot's bytes (nvcc lays it out even where [[no_unique_address]]
  // makes sizeof say otherwise).
  using Item = std::conditional_t<std::is_same_v<MaskPack, NoPack> || SHARED, ItemWithoutMask, ItemWithMask>;
  using Final = MaskedSoftmaxFinal;
  static constexpr bool kItemIsX = MASK == MaskKind::none;

  const V* x;
  V* out;
  const MaskPack* mask = nullptr;
  MaskPack* shared_mask = nullptr;  // SHARED: the block's dynamic shared memory
  // causal: the last column query i sees, clamped to [-1, cols], less the
  // shift (a column of this policy's packs, p*PACK + e)
  int limit = 0;
  float scale;
  int zero_rows;
  unsigned fill = 0;        // folded: T's -inf (or +inf) bits in both halves of the word
  bool zero_scale = false;  // folded: x is multiplied by 0 before the fold, scale is 1
  static constexpr bool kPrepares = MASK == MaskKind::boolean && sizeof(T) == 2;

  __device__ __forceinline__ MaskedSoftmaxOp(const FusedArgs& a, std::int64_t row, int shift)
      : x(fused_row<T, V>(a.x, row, a.x_stride, shift)),
        out(fused_row<T, V>(a.out, row, a.out_stride, shift)),
        scale(a.scale),
        zero_rows(a.zero_masked_rows) {
    if constexpr (MASK != MaskKind::none) {
      // Query i of head h of batch b; divisions by multiplication where the
      // rows allow it (row_divisor.hpp).
      const RowQuotient by_query = divide(a.seq_q_divisor, row);
      const std::int64_t i = by_query.r;
      if constexpr (MASK == MaskKind::causal) {
        // 32-bit column compares (cols < 2^31) cost fewer registers.
        const std::int64_t last = i + a.causal_offset;
        limit = static_cast<int>(last < -1 ? -1 : last > a.cols ? a.cols : last) - shift;
      } else {
        const RowQuotient by_head = divide(a.heads_divisor, by_query.q);
        const std::int64_t off = by_head.q * a.mask_batch_stride + by_head.r * a.mask_head_stride +
                                 i * a.mask_row_stride + shift;
        if constexpr (MASK == MaskKind::additive)
          mask = reinterpret_cast<const MaskPack*>(static_cast<const T*>(a.mask) + off);
        else
          mask = reinterpret_cast<const MaskPack*>(static_cast<const std::uint8_t*>(a.mask) + off);
        if constexpr (SHARED) {
          extern __shared__ float4 dynamic_smem[];
          shared_mask = reinterpret_cast<MaskPack*>(dynamic_smem);
        }
        if constexpr (kPrepares) {
          fill = a.scale >= 0 ? kNegInfHalves<T> : kPosInfHalves<T>;
          zero_scale = a.scale == 0.0f;
          if (zero_scale) scale = 1.0f;
        }
      }
    }
  }
  // The same row and shift in packs of another size (Scalar from the body's
  // policy): the same pointers and limit, nothing computed again.
  template <int P, bool S>
  __device__ __forceinline__ explicit MaskedSoftmaxOp(const MaskedSoftmaxOp<T, P, MASK, S>& o)
      : x(reinterpret_cast<const V*>(o.x)),
        out(reinterpret_cast<V*>(o.out)),
        mask(reinterpret_cast<const MaskPack*>(o.mask)),
        limit(o.limit),
        scale(o.scale),
        zero_rows(o.zero_rows),
        fill(o.fill),
        zero_scale(o.zero_scale) {}

  template <LoadHint H>
  __device__ __forceinline__ void load(Item& it, std::int64_t p) const {
    if constexpr (MASK == MaskKind::causal) {
      // A pack wholly past the diagonal is never read: its values are -inf
      // whatever x holds.
      if (static_cast<int>(p) * PACK > limit) {
        it.x = V{};
        return;
      }
    }
    if constexpr (SHARED) copy_to_shared(shared_mask + p, mask + p);
    it.x = load_hinted<H>(x + p);
    if constexpr (!SHARED && MASK == MaskKind::additive) it.mk = load_hinted<H>(mask + p);
    if constexpr (!SHARED && MASK == MaskKind::boolean) it.mk = mask[p];
  }
  // Pack p's mask, read once a pack: from the Item, or from shared memory.
  __device__ __forceinline__ MaskPack mask_of(const Item& it, std::int64_t p) const {
    if constexpr (SHARED)
      return shared_mask[p];
    else if constexpr (std::is_same_v<MaskPack, NoPack>)
      return NoPack{};
    else
      return it.mk;
  }

  // The boolean mask into x (see above), after the Item's loads and the
  // mask's copies to shared memory have landed.
  __device__ __forceinline__ void prepare(Item& it, std::int64_t p) const {
    static_assert(kPrepares, "only a boolean mask over 16-bit x folds");
    if (zero_scale) [[unlikely]]
      it.x = make_pack<T, V>([&](int e) { return 0.0f * element<T>(it.x, e); });
    it.x = fold_mask<T, PACK>(it.x, mask_of(it, p), fill);
  }

  // causal over 16-bit x: where pack p lies against the row's last
  // visible column, told once a pack. Only the pack holding that column
  // compares columns: the packs before it are seen whole, the packs past
  // it are -inf whole, which adds nothing to the row and is 0 in y, so
  // neither pass spends an instruction an element there. float32 rows,
  // memory-bound, compare every element (which measured faster there:
  // bench/NOTES.md v98).
  static constexpr bool kSides = MASK == MaskKind::causal && sizeof(T) == 2;
  enum class Side { before, diagonal, past };
  __device__ __forceinline__ Side side(std::int64_t p) const {
    const int first = static_cast<int>(p) * PACK;
    return first > limit ? Side::past : first + PACK - 1 > limit ? Side::diagonal : Side::before;
  }

  // v of element e of a prepared Item (a folded mask is in x already);
  // with kSides, causal columns are compared only in the DIAGONAL's pack.
  template <bool DIAGONAL = false>
  __device__ __forceinline__ float value(const Item& it, const MaskPack& mk, int e, std::int64_t p) const {
    float v = scale * element<T>(it.x, e);
    if constexpr (MASK == MaskKind::additive) v += element<T>(mk, e);
    if constexpr (MASK == MaskKind::boolean && !kPrepares) v = mask_byte(mk, e) != 0 ? kNegInf : v;
    if constexpr (MASK == MaskKind::causal && (DIAGONAL || !kSides))
      v = static_cast<int>(p) * PACK + e > limit ? kNegInf : v;
    return v;
  }

  __device__ __forceinline__ void accumulate(RowAcc& acc, const Item& it, std::int64_t p) const {
    const MaskPack mk = mask_of(it, p);
    if constexpr (kSides) {
      const Side at = side(p);
      if (at == Side::past) return;
      if (at == Side::diagonal) {
        online_add<PACK>(acc.m, acc.s, [&](int e) { return value<true>(it, mk, e, p); });
        return;
      }
    }
    online_add<PACK>(acc.m, acc.s, [&](int e) { return value(it, mk, e, p); });
  }

  __device__ __forceinline__ Final finish(const RowAcc& r) const { return {r.m, 1.0f / r.s, r.m == kNegInf}; }
  __device__ __forceinline__ bool writes() const { return true; }

  // A dead row's fill is chosen once a pack, outside the element loop: a
  // test inside it becomes a branch around every element of a boolean
  // mask's packs (bench/NOTES.md v53).
  __device__ __forceinline__ void store(const Item& it, std::int64_t p, const Final& f, bool streaming) const {
    V o;
    if (f.dead) {
      const float fill = zero_rows ? 0.0f : kNaN;
      o = make_pack<T, V>([&](int) { return fill; });
    } else {
      const MaskPack mk = mask_of(it, p);
      const Side at = kSides ? side(p) : Side::before;
      if (at == Side::past) {
        const float zero = 0.0f * f.inv_s;  // NaN where the row's sum is (a NaN or +inf seen)
        o = make_pack<T, V>([&](int) { return zero; });
      } else if (at == Side::diagonal)
        o = make_pack<T, V>([&](int e) { return exp_shifted(value<true>(it, mk, e, p), f.m) * f.inv_s; });
      else
        o = make_pack<T, V>([&](int e) { return exp_shifted(value(it, mk, e, p), f.m) * f.inv_s; });
    }
    store_pack(out + p, o, streaming);
  }
  __device__ __forceinline__ void epilogue(const Final&, std::int64_t) const {}
};

// ------------------------------------------------------------ the backwards
// What the backward policies share: packs of y and dy (TIn) and of dx
// (TOut) at one row and shift, and their load.
template <class TIn, class TOut, int PACK>
struct BackwardPacks {
  using Elem = TIn;  // x is y
  using F = PackWords<TIn, PACK>;
  using V = PackWords<TOut, PACK>;
  struct Item {
    F y, dy;
  };
  const F* y;
  const F* dy;
  V* out;

  __device__ __forceinline__ BackwardPacks(const FusedArgs& a, std::int64_t row, int shift)
      : y(fused_row<TIn, F>(a.x, row, a.x_stride, shift)),
        dy(fused_row<TIn, F>(a.dy, row, a.dy_stride, shift)),
        out(fused_row<TOut, V>(a.out, row, a.out_stride, shift)) {}
  // The same row and shift in packs of another size (Scalar from the body's).
  template <int P>
  __device__ __forceinline__ explicit BackwardPacks(const BackwardPacks<TIn, TOut, P>& o)
      : y(reinterpret_cast<const F*>(o.y)), dy(reinterpret_cast<const F*>(o.dy)), out(reinterpret_cast<V*>(o.out)) {}

  template <LoadHint H>
  __device__ __forceinline__ void load(Item& it, std::int64_t p) const {
    it.y = load_hinted<H>(y + p);
    it.dy = load_hinted<H>(dy + p);
  }
};

// The masked softmax's: dx = scale * y * (dy - sum(dy * y)).
struct DotFinal {
  float dot;
};

template <class T, int PACK>
struct MaskedSoftmaxBackwardOp : BackwardPacks<T, T, PACK> {
  static constexpr bool kSoftmax = false;
  static constexpr int kSums = 1;
  using Base = BackwardPacks<T, T, PACK>;
  using typename Base::Item;
  using typename Base::V;
  using Scalar = MaskedSoftmaxBackwardOp<T, 1>;
  using Final = DotFinal;
  float scale;

  __device__ __forceinline__ MaskedSoftmaxBackwardOp(const FusedArgs& a, std::int64_t row, int shift)
      : Base(a, row, shift), scale(a.scale) {}
  template <int P>
  __device__ __forceinline__ explicit MaskedSoftmaxBackwardOp(const MaskedSoftmaxBackwardOp<T, P>& o)
      : Base(o), scale(o.scale) {}

  __device__ __forceinline__ void accumulate(RowAcc& acc, const Item& it, std::int64_t) const {
#pragma unroll
    for (int e = 0; e < PACK; ++e) acc.a += element<T>(it.y, e) * element<T>(it.dy, e);
  }
  __device__ __forceinline__ Final finish(const RowAcc& r) const { return {r.a}; }
  __device__ __forceinline__ bool writes() const { return true; }
  __device__ __forceinline__ void store(const Item& it, std::int64_t p, const Final& f, bool streaming) const {
    const V o = make_pack<T, V>(
        [&](int e) { return scale * element<T>(it.y, e) * (element<T>(it.dy, e) - f.dot); });
    store_pack(this->out + p, o, streaming);
  }
  __device__ __forceinline__ void epilogue(const Final&, std::int64_t) const {}
};

// ------------------------------------------------------------ cross-entropy
// Shared by the forward and the backward: the row's target and the
// gradient's coefficients. The gradient of element j is
//   c_p * exp(x_j - m) - (j == t ? c_t : 0) - c_u
// with c_p = g (1 + 2 z lse) / s, c_t = g (1 - eps), c_u = g eps / V; ignored
// rows write 0, rows with an invalid target NaN.
struct CeRow {
  int t;         // the target column, or -1 (ignored or invalid)
  bool ignored;
  bool invalid;
  bool here;     // the target column is in this row's columns (t >= 0 before any shift)
};
// Targets are classes of the whole vocabulary (fused_vocab); a shard
// (vocab_start > 0 or vocab > cols) holds the one-hot column of the rows
// whose target falls in [vocab_start, vocab_start + cols). shard_stats
// without targets: no target column, nothing ignored or invalid.
// A row's target where the launch has targets (0 otherwise, unread).
__device__ __forceinline__ std::int64_t row_target(const FusedArgs& a, std::int64_t row) {
  return a.target == nullptr ? 0 : target_of(a, row);
}
// The row whose target is t (row_target, loaded ahead where a kernel
// would otherwise wait on it: block_row_ahead).
__device__ __forceinline__ CeRow ce_row_of(const FusedArgs& a, std::int64_t t) {
  CeRow r{-1, false, false, false};
  if (a.target == nullptr) return r;
  const std::int64_t vocab = a.vocab > 0 ? a.vocab : a.cols;
  r.ignored = t == a.ignore_index;
  r.invalid = !r.ignored && (t < 0 || t >= vocab);
  const std::int64_t local = t - a.vocab_start;
  r.here = !r.ignored && !r.invalid && local >= 0 && local < a.cols;
  r.t = r.here ? static_cast<int>(local) : -1;
  return r;
}
__device__ __forceinline__ CeRow ce_row(const FusedArgs& a, std::int64_t row) {
  return ce_row_of(a, row_target(a, row));
}
// The row's target logit x[t] (0 without a target here), one load a thread
// issued with the row's first loads: no compare an element to pick it out.
template <class T>
__device__ __forceinline__ float target_logit(const FusedArgs& a, std::int64_t row, const CeRow& r) {
  if (!r.here) return 0.0f;
  using W = PackWords<T, 1>;
  return element<T>(reinterpret_cast<const W*>(static_cast<const T*>(a.x) + row * a.x_stride)[r.t], 0);
}
// g: the upstream gradient of the row's loss (mean divides by the rows
// counted, which the count kernel has put in the workspace).
__device__ __forceinline__ float ce_grad_scale(const FusedArgs& a, std::int64_t row, bool forward) {
  const float g = forward ? 1.0f : (a.reduction == Reduction::none ? a.grad_loss[row] : a.grad_loss[0]);
  return a.reduction == Reduction::mean ? g / static_cast<float>(ce_counters(a)[0]) : g;
}

struct CeFinal {
  float m, lse, loss;
  float c_p, c_t, c_u;
  bool zero, nan;  // ignored row: zeros; invalid target: NaN
};
__device__ __forceinline__ CeFinal ce_final(const FusedArgs& a, const CeRow& r, float g, float m, float inv_s,
                                            float lse) {
  CeFinal f;
  f.m = m;
  f.lse = lse;
  const float eps = a.label_smoothing;
  f.c_p = g * (1.0f + 2.0f * a.z_loss * lse) * inv_s;
  f.c_t = g * (1.0f - eps);
  f.c_u = g * eps / static_cast<float>(a.vocab > 0 ? a.vocab : a.cols);
  f.loss = 0.0f;
  f.zero = r.ignored;
  f.nan = r.invalid;
  return f;
}
// One gradient element of a row that is neither ignored nor invalid, but
// for the target's one-hot term (c_t, which the caller subtracts at the
// target's column only).
__device__ __forceinline__ float ce_grad(const CeFinal& f, float x) { return f.c_p * exp_shifted(x, f.m) - f.c_u; }

// What the policies that read the logits alone share: the row's packs of
// x and their load.
template <class T, int PACK>
struct LogitPacks {
  using Elem = T;
  using V = PackWords<T, PACK>;
  struct Item {
    V x;
  };
  static constexpr bool kItemIsX = true;
  const V* x;

  template <LoadHint H>
  __device__ __forceinline__ void load(Item& it, std::int64_t p) const {
    it.x = load_hinted<H>(x + p);
  }
};

// Cross-entropy's gradient rows (the forward's memory-saving output and the
// backward): the row's target and the packs of the gradient, each element
// ce_grad of its logit.
template <class T, int PACK>
struct CeGradPacks : LogitPacks<T, PACK> {
  using typename LogitPacks<T, PACK>::V;
  using typename LogitPacks<T, PACK>::Item;
  const FusedArgs& a;
  V* out;   // null in a forward without an output
  CeRow r;  // r.t less the shift: the target's column of this policy's packs
  float xt;  // the target logit (the forward's loss; 0 in the backward)

  __device__ __forceinline__ CeGradPacks(const FusedArgs& args, std::int64_t row, int shift, bool forward)
      : CeGradPacks(args, row, shift, forward, ce_row(args, row)) {}
  // The row's CeRow from a target loaded ahead (ce_row_of).
  __device__ __forceinline__ CeGradPacks(const FusedArgs& args, std::int64_t row, int shift, bool forward,
                                         const CeRow& row_state)
      : LogitPacks<T, PACK>{fused_row<T, V>(args.x, row, args.x_stride, shift)},
        a(args),
        out(forward && !args.out ? nullptr : fused_row<T, V>(args.out, row, args.out_stride, shift)),
        r(row_state),
        xt(forward ? target_logit<T>(args, row, r) : 0.0f) {
    r.t -= shift;  // -1 (no target) stays below every column
  }
  template <int P>
  __device__ __forceinline__ explicit CeGradPacks(const CeGradPacks<T, P>& o)
      : LogitPacks<T, PACK>{reinterpret_cast<const V*>(o.x)}, a(o.a), out(reinterpret_cast<V*>(o.out)), r(o.r), xt(o.xt) {}

  // Tests a pack, not an element: an ignored or invalid row's fill (the
  // same for every pack of the row, so its threads do not diverge), and
  // whether the pack holds the target's column (one pack of the row).
  __device__ __forceinline__ void store(const Item& it, std::int64_t p, const CeFinal& f, bool streaming) const {
    const int k = r.t - static_cast<int>(p) * PACK;  // the target's element, if in [0, PACK)
    if (f.zero || f.nan) {
      const float fill = f.zero ? 0.0f : kNaN;
      store_pack(out + p, make_pack<T, V>([&](int) { return fill; }), streaming);
    } else if (static_cast<unsigned>(k) < static_cast<unsigned>(PACK)) {
      store_pack(out + p,
                 make_pack<T, V>([&](int e) { return ce_grad(f, element<T>(it.x, e)) - (e == k ? f.c_t : 0.0f); }),
                 streaming);
    } else {
      store_pack(out + p, make_pack<T, V>([&](int e) { return ce_grad(f, element<T>(it.x, e)); }), streaming);
    }
  }
};

// A pack of logits into a row's partial results, as the cross-entropy
// forward and a shard's statistics both take them: the online pair and,
// where `sum_logits` (the same for the whole launch), a = the sum of the
// logits.
template <class T, int PACK, class V>
__device__ __forceinline__ void logit_sums(RowAcc& acc, const V& x, bool sum_logits) {
  online_add<PACK>(acc.m, acc.s, [&](int e) { return element<T>(x, e); });
  if (sum_logits) {
#pragma unroll
    for (int e = 0; e < PACK; ++e) acc.a += element<T>(x, e);
  }
}

// The forward: lse by the online pair, a = sum of x (label smoothing),
// x[t] loaded once; the gradient for an upstream 1 where out is set.
template <class T, int PACK>
struct CrossEntropyOp : CeGradPacks<T, PACK> {
  static constexpr bool kSoftmax = true;
  static constexpr int kSums = 1;
  using Scalar = CrossEntropyOp<T, 1>;
  using Final = CeFinal;
  using Base = CeGradPacks<T, PACK>;
  using typename Base::Item;
  using Base::a;
  using Base::out;
  using Base::r;
  using Base::xt;

  __device__ __forceinline__ CrossEntropyOp(const FusedArgs& args, std::int64_t row, int shift)
      : Base(args, row, shift, true) {}
  __device__ __forceinline__ CrossEntropyOp(const FusedArgs& args, std::int64_t row, int shift, const CeRow& r)
      : Base(args, row, shift, true, r) {}
  template <int P>
  __device__ __forceinline__ explicit CrossEntropyOp(const CrossEntropyOp<T, P>& o) : Base(o) {}

  // The logits' sum only for label smoothing.
  __device__ __forceinline__ void accumulate(RowAcc& acc, const Item& it, std::int64_t) const {
    logit_sums<T, PACK>(acc, it.x, a.label_smoothing != 0.0f);
  }
  __device__ __forceinline__ Final finish(const RowAcc& acc) const {
    const float log_s = logf(acc.s);
    const float lse = acc.m + log_s;
    Final f = ce_final(a, r, ce_grad_scale(a, 0, true), acc.m, 1.0f / acc.s, lse);
    const float eps = a.label_smoothing;
    // lse - x_t as (m - x_t) + log(s): exact where x_t is the max, however
    // large the logits (m + log(s) rounds to the spacing of m). The
    // smoothing term only where eps is set: a -inf logit makes the row's
    // sum -inf, and 0 * -inf would turn a finite loss into NaN.
    float loss = (1.0f - eps) * ((acc.m - xt) + log_s) + a.z_loss * lse * lse;
    if (eps != 0.0f) loss += eps * ((acc.m - acc.a / static_cast<float>(a.cols)) + log_s);
    f.loss = r.ignored ? 0.0f : r.invalid ? kNaN : loss;
    return f;
  }
  __device__ __forceinline__ bool writes() const { return out != nullptr; }
  __device__ __forceinline__ void epilogue(const Final& f, std::int64_t row) const {
    if (a.lse) a.lse[row] = r.invalid ? kNaN : f.lse;
    if (a.reduction == Reduction::none)
      a.loss[row] = f.loss;
    else
      ce_row_losses(a)[row] = f.loss;
  }
};

// The backward from the forward's lse: elementwise, no reduction.
template <class T, int PACK>
struct CrossEntropyBackwardOp : CeGradPacks<T, PACK> {
  static constexpr bool kSoftmax = false;
  static constexpr int kSums = 0;
  using Scalar = CrossEntropyBackwardOp<T, 1>;
  using Final = CeFinal;
  using Base = CeGradPacks<T, PACK>;
  using typename Base::Item;
  using Base::a;
  using Base::r;
  std::int64_t row;

  __device__ __forceinline__ CrossEntropyBackwardOp(const FusedArgs& args, std::int64_t row_, int shift)
      : Base(args, row_, shift, false), row(row_) {}
  template <int P>
  __device__ __forceinline__ explicit CrossEntropyBackwardOp(const CrossEntropyBackwardOp<T, P>& o)
      : Base(o), row(o.row) {}

  __device__ __forceinline__ void accumulate(RowAcc&, const Item&, std::int64_t) const {}
  __device__ __forceinline__ Final finish(const RowAcc&) const {
    // exp(x - lse) = exp(x - m) / s with m = lse, s = 1.
    const float lse = a.lse[row];
    return ce_final(a, r, ce_grad_scale(a, row, false), lse, 1.0f, lse);
  }
  __device__ __forceinline__ bool writes() const { return true; }
  __device__ __forceinline__ void epilogue(const Final&, std::int64_t) const {}
};

// ------------------------------------------------------------ vocabulary-parallel halves
// A shard's statistics: the online pair, a = sum of x, and the target's
// logit (loaded once) where the target falls in this shard. Nothing is
// written but the row's four floats.
template <class T, int PACK>
struct ShardStatsOp : LogitPacks<T, PACK> {
  static constexpr bool kSoftmax = true;
  static constexpr int kSums = 1;
  using Scalar = ShardStatsOp<T, 1>;
  using Final = RowAcc;
  using Base = LogitPacks<T, PACK>;
  using typename Base::V;
  using typename Base::Item;
  const FusedArgs& a;
  CeRow r;
  float xt;  // the target logit

  __device__ __forceinline__ ShardStatsOp(const FusedArgs& args, std::int64_t row, int shift)
      : Base{fused_row<T, V>(args.x, row, args.x_stride, shift)},
        a(args),
        r(ce_row(args, row)),
        xt(target_logit<T>(args, row, r)) {}
  template <int P>
  __device__ __forceinline__ explicit ShardStatsOp(const ShardStatsOp<T, P>& o)
      : Base{reinterpret_cast<const V*>(o.x)}, a(o.a), r(o.r), xt(o.xt) {}

  // The logits' sum always: the combine's label smoothing needs it.
  __device__ __forceinline__ void accumulate(RowAcc& acc, const Item& it, std::int64_t) const {
    logit_sums<T, PACK>(acc, it.x, true);
  }
  __device__ __forceinline__ Final finish(const RowAcc& acc) const { return acc; }
  __device__ __forceinline__ bool writes() const { return false; }
  __device__ __forceinline__ void store(const Item&, std::int64_t, const Final&, bool) const {}
  __device__ __forceinline__ void epilogue(const Final& f, std::int64_t row) const {
    reinterpret_cast<float4*>(a.stats)[row] = make_float4(f.m, f.s, r.invalid ? kNaN : xt, f.a);
  }
};

// A shard's softmax or log_softmax from the whole row's lse (or its max
// and log S): elementwise.
struct ShardSoftmaxFinal {
  float m, lse;
};

template <class T, int PACK>
struct ShardSoftmaxOp : LogitPacks<T, PACK> {
  static constexpr bool kSoftmax = false;
  static constexpr int kSums = 0;
  using Scalar = ShardSoftmaxOp<T, 1>;
  using Final = ShardSoftmaxFinal;
  using Base = LogitPacks<T, PACK>;
  using typename Base::V;
  using typename Base::Item;
  V* out;
  float m, lse;
  int log;

  __device__ __forceinline__ ShardSoftmaxOp(const FusedArgs& a, std::int64_t row, int shift)
      : Base{fused_row<T, V>(a.x, row, a.x_stride, shift)},
        out(fused_row<T, V>(a.out, row, a.out_stride, shift)),
        m(a.row_max != nullptr ? a.row_max[row] : 0.0f),
        lse(a.lse[row]),
        log(a.log_softmax) {}
  template <int P>
  __device__ __forceinline__ explicit ShardSoftmaxOp(const ShardSoftmaxOp<T, P>& o)
      : Base{reinterpret_cast<const V*>(o.x)}, out(reinterpret_cast<V*>(o.out)), m(o.m), lse(o.lse), log(o.log) {}

  __device__ __forceinline__ void accumulate(RowAcc&, const Item&, std::int64_t) const {}
  __device__ __forceinline__ Final finish(const RowAcc&) const { return {m, lse}; }
  __device__ __forceinline__ bool writes() const { return true; }
  __device__ __forceinline__ void store(const Item& it, std::int64_t p, const Final& f, bool streaming) const {
    const V o = make_pack<T, V>([&](int e) {
      const float v = (element<T>(it.x, e) - f.m) - f.lse;
      return log ? v : exp_shifted(v, 0.0f);
    });
    store_pack(out + p, o, streaming);
  }
  __device__ __forceinline__ void epilogue(const Final&, std::int64_t) const {}
};

// ------------------------------------------------------------ widening softmax
// softmax or log_softmax of 16-bit x written as float32, and its backward
// from float32 y and dy into a 16-bit dx: torch's softmax(x, dim,
// dtype=torch.float32) and its gradient, the cast in the same pass. A pack
// is 4 elements (fused_vec), 16 bytes of the float32 tensors and 8 of the
// 16-bit one, so each load and store of a warp covers whole 32-byte
// sectors (packs of 8 16-bit elements, two 16-byte stores of float32 a
// lane, left every sector half-written by each store: bench/NOTES.md v43).

// Values 0..PACK-1 written as float32 from `out`: whole 16-byte words
// where PACK is a multiple of 4, else one float at a time. The words go
// through store_words or store_streaming: a plain store of them was split
// into four st.global.f32 in block_row's later packs (sm_90 PTX).
template <int PACK, class Value>
__device__ __forceinline__ void store_floats(float* out, const Value& value, bool streaming) {
  if constexpr (PACK % 4 == 0) {
#pragma unroll
    for (int q = 0; q < PACK / 4; ++q) {
      auto* p = reinterpret_cast<DUET_RAW16*>(out) + q;
      const DUET_RAW16 w = make_pack<float, DUET_RAW16>([&](int e) { return value(4 * q + e); });
      if (streaming)
        store_streaming(p, w);
      else
        store_words(p, w);
    }
  } else {
#pragma unroll
    for (int e = 0; e < PACK; ++e) out[e] = value(e);
  }
}

struct WideningFinal {
  float m, inv_s, log_s;
};

template <class T, int PACK>
struct WideningSoftmaxOp : LogitPacks<T, PACK> {
  static constexpr bool kSoftmax = true;
  static constexpr int kSums = 0;
  using Scalar = WideningSoftmaxOp<T, 1>;
  using Final = WideningFinal;
  using Base = LogitPacks<T, PACK>;
  using typename Base::V;
  using typename Base::Item;
  float* out;
  int log;

  __device__ __forceinline__ WideningSoftmaxOp(const FusedArgs& a, std::int64_t row, int shift)
      : Base{fused_row<T, V>(a.x, row, a.x_stride, shift)},
        out(static_cast<float*>(a.out) + row * a.out_stride + shift),
        log(a.log_softmax) {}
  template <int P>
  __device__ __forceinline__ explicit WideningSoftmaxOp(const WideningSoftmaxOp<T, P>& o)
      : Base{reinterpret_cast<const V*>(o.x)}, out(o.out), log(o.log) {}

  __device__ __forceinline__ void accumulate(RowAcc& acc, const Item& it, std::int64_t) const {
    online_add<PACK>(acc.m, acc.s, [&](int e) { return element<T>(it.x, e); });
  }
  __device__ __forceinline__ Final finish(const RowAcc& r) const { return {r.m, 1.0f / r.s, logf(r.s)}; }
  __device__ __forceinline__ bool writes() const { return true; }
  __device__ __forceinline__ void store(const Item& it, std::int64_t p, const Final& f, bool streaming) const {
    store_floats<PACK>(
        out + p * PACK,
        [&](int e) { return forward_value(element<T>(it.x, e), f.m, f.inv_s, f.log_s, log); }, streaming);
  }
  __device__ __forceinline__ void epilogue(const Final&, std::int64_t) const {}
};

// The widening softmax's: dx (16-bit) from float32 y and dy.
template <class T, int PACK>
struct WideningSoftmaxBackwardOp : BackwardPacks<float, T, PACK> {
  static constexpr bool kSoftmax = false;
  static constexpr int kSums = 1;
  using Base = BackwardPacks<float, T, PACK>;
  using typename Base::Item;
  using typename Base::V;
  using Scalar = WideningSoftmaxBackwardOp<T, 1>;
  using Final = DotFinal;
  int log;

  __device__ __forceinline__ WideningSoftmaxBackwardOp(const FusedArgs& a, std::int64_t row, int shift)
      : Base(a, row, shift), log(a.log_softmax) {}
  template <int P>
  __device__ __forceinline__ explicit WideningSoftmaxBackwardOp(const WideningSoftmaxBackwardOp<T, P>& o)
      : Base(o), log(o.log) {}

  __device__ __forceinline__ void accumulate(RowAcc& acc, const Item& it, std::int64_t) const {
#pragma unroll
    for (int e = 0; e < PACK; ++e) acc.a += backward_term(element<float>(it.y, e), element<float>(it.dy, e), log);
  }
  __device__ __forceinline__ Final finish(const RowAcc& r) const { return {r.a}; }
  __device__ __forceinline__ bool writes() const { return true; }
  __device__ __forceinline__ void store(const Item& it, std::int64_t p, const Final& f, bool) const {
    store_words(this->out + p, make_pack<T, V>([&](int e) {
                  return backward_value(element<float>(it.y, e), element<float>(it.dy, e), f.dot, log);
                }));
  }
  __device__ __forceinline__ void epilogue(const Final&, std::int64_t) const {}
};

// The policy of catalogue entry (op, mask).
template <FusedOp OP, MaskKind MASK, class T, int PACK>
struct OpOf;
template <MaskKind MASK, class T, int PACK>
struct OpOf<FusedOp::masked_softmax, MASK, T, PACK> {
  using type = MaskedSoftmaxOp<T, PACK, MASK>;
};
template <MaskKind MASK, class T, int PACK>
struct OpOf<FusedOp::masked_softmax_backward, MASK, T, PACK> {
  using type = MaskedSoftmaxBackwardOp<T, PACK>;
};
template <MaskKind MASK, class T, int PACK>
struct OpOf<FusedOp::cross_entropy, MASK, T, PACK> {
  using type = CrossEntropyOp<T, PACK>;
};
template <MaskKind MASK, class T, int PACK>
struct OpOf<FusedOp::cross_entropy_backward, MASK, T, PACK> {
  using type = CrossEntropyBackwardOp<T, PACK>;
};

template <MaskKind MASK, class T, int PACK>
struct OpOf<FusedOp::shard_stats, MASK, T, PACK> {
  using type = ShardStatsOp<T, PACK>;
};
template <MaskKind MASK, class T, int PACK>
struct OpOf<FusedOp::shard_softmax, MASK, T, PACK> {
  using type = ShardSoftmaxOp<T, PACK>;
};

template <MaskKind MASK, class T, int PACK>
struct OpOf<FusedOp::widening_softmax, MASK, T, PACK> {
  using type = WideningSoftmaxOp<T, PACK>;
};
template <MaskKind MASK, class T, int PACK>
struct OpOf<FusedOp::widening_softmax_backward, MASK, T, PACK> {
  using type = WideningSoftmaxBackwardOp<T, PACK>;
};

}  // namespace duet::DUET_NS::kernels
