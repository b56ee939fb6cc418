// How the launch finds a catalogue entry's kernels: each family's file
// specializes kFamilyKernels for its Strategy, naming the kernel
// instantiation(s) of its catalogue entries (kernels/softmax_variants.hpp).
// kernels/softmax_launch.cu builds its table of every entry from these, so
// the launch itself names no family.
#pragma once

#include "common/storage.cuh"
#include "softmax_args.hpp"
#include "softmax_variants.hpp"

namespace duet::DUET_NS::kernels {

using KernelFn = void (*)(SoftmaxArgs);

struct KernelPair {
  KernelFn main = nullptr;
  KernelFn finalize = nullptr;  // run after main where FamilyInfo::two_kernels
};

// Catalogue entry I and the storage type of its dtype.
template <int I>
inline constexpr Variant kEntry = kCatalogue[I];
template <int I>
using EntryStorage = typename StorageOf<kEntry<I>.dtype>::type;

template <Strategy S>
constexpr KernelPair no_family_kernels() {
  static_assert(S != S, "a family's file specializes kFamilyKernels for its Strategy");
  return {};
}
// Entry I's kernels, for an entry of family S: one partial specialization
// a family, `template <int I> kFamilyKernels<Strategy::..., I> = {...}`.
template <Strategy S, int I>
inline constexpr KernelPair kFamilyKernels = no_family_kernels<S>();

}  // namespace duet::DUET_NS::kernels
