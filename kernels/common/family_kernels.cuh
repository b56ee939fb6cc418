// How the launch finds a catalogue entry's kernels: each family's file
// specializes FamilyKernels for its Strategy, and entry<I>() names the
// kernel instantiation(s) of catalogue entry I (kernels/softmax_variants.hpp).
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

// The storage type of entry I's dtype.
template <int I>
using EntryStorage = typename StorageOf<kCatalogue[I].dtype>::type;

template <Strategy S>
struct FamilyKernels;  // entry<I>() -> KernelPair, one specialization a family

}  // namespace duet::DUET_NS::kernels
