// DUET_HOST_DEVICE: a function of plain arithmetic that host code and the
// kernels share (a workspace's layout, a combine of statistics), compiled
// for both where a vendor compiler builds the file.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define DUET_HOST_DEVICE __host__ __device__
#else
#define DUET_HOST_DEVICE
#endif
