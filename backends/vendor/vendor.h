// The one place duet includes a vendor runtime header.
//
// Everything else in backends/ and kernels/ is written in CUDA spelling, so
// hipify-perl translates it mechanically; as ggml-cuda does with its
// vendors/ headers, this header includes one name map per vendor, so hipcc
// also compiles the same files directly:
//   vendor_cuda.h  the CUDA runtime headers and the device facts for nvcc
//   vendor_hip.h   the CUDA names duet uses mapped onto HIP's
//   hopper_ptx.h   every inline PTX helper (NVIDIA only), with its guard
// (named vendor_*.h, not cuda.h / hip.h: a cuda.h on the include path would
// shadow the toolkit's own <cuda.h>).
//
// Exactly one of DUET_VENDOR_CUDA / DUET_VENDOR_HIP is defined by the build,
// and DUET_NS names the namespace the backend's symbols live in (duet::cuda
// or duet::hip), so one process can link both backends.
//
// Every name below means the same on both vendors: kernels use these, never
// a vendor test of their own.
//   DUET_DEVICE_WARP_SIZE     32, or the wavefront (64 on CDNA)
//   DUET_DEVICE_CLUSTERS      1 where device code may use thread-block clusters
//   DUET_DEVICE_CVT_RN16      1 where duet_cvt_rn_{bf16,f16}x2 and duet_max_{bf16,f16}x2 exist
//   DUET_FAST_EXP2(x)         2^x on the hardware unit
//   DUET_RAW16, DUET_RAW16_WORD, DUET_RAW16_MAKE   16 bytes as one register value
//   DUET_LOAD_KEEP, DUET_LOAD_LAST_USE, DUET_STORE_STREAMING   cache hints
//   DUET_STORE_WORDS          one store instruction for a pack's words
//   duet_byte_signs(w, sel)   bytes of 0xff / 0x00 from the top bits of w's bytes
//   DUET_FULL_MASK            the shuffle mask
//   duet::vendor::            kName, memory_type, launch_cluster, launch_cooperative,
//                             max_active_clusters
//
// The places that still branch on the vendor or the architecture, and why:
//   - here: which name map.
//   - backends/gpu/gpu_device.cu: hipDeviceProp_t has other fields
//     (gcnArchName, no regsPerMultiprocessor...), and HIP has no cluster
//     attribute to read.
//   - tests/test_props_mapping.cpp: a device struct as each vendor fills it.
//   - kernels/common/storage.cuh: DUET_DEVICE_CVT_RN16 picks one-instruction
//     rounding to 16 bits (sm_80+) over rounding by hand.
//   - kernels/families/interleaved_ring.cuh: DUET_DEVICE_CVT_RN16 also picks
//     a 16-bit max two halves at a time over one element at a time.
//   - kernels/families/cluster_row.cuh: its body needs DUET_DEVICE_CLUSTERS
//     (sm_90+); elsewhere the kernel is empty and never launched.
//   - kernels/common/reduce.cuh: the cluster exchange exists only under
//     DUET_DEVICE_CLUSTERS, for the same reason.
//   - kernels/common/held_slices.cuh and families/grid_row.cuh: their rows
//     copy into shared memory by cp.async, under DUET_DEVICE_CP_ASYNC
//     (sm_80+); elsewhere grid_row's kernel is empty and never launched.
//   - hopper_ptx.h: each helper guarded by the architecture it needs; its
//     user bench/experiments/synccheck_cluster_repro.cu guards its kernel the same way.
#pragma once

#if defined(DUET_VENDOR_CUDA) == defined(DUET_VENDOR_HIP)
#error "define exactly one of DUET_VENDOR_CUDA and DUET_VENDOR_HIP"
#endif

#if defined(DUET_VENDOR_HIP)
#include "vendor_hip.h"
#else
#include "vendor_cuda.h"
#include "hopper_ptx.h"
#endif  // DUET_VENDOR_HIP

// Full shuffle mask, wide enough for a 64-lane wavefront (ignored on HIP).
#define DUET_FULL_MASK 0xffffffffu
