// Machine ceilings for `cedar bench`, measured in the same run as the model timings (these
// machines are noisy: a ceiling measured an hour earlier is not the one the model ran against).
//  * read bandwidth: every thread of the pool streams its own slice of a buffer much larger than
//    the last-level cache (first-touched by the same thread) and sums it as 64-bit integers;
//  * FMA peak: independent chains of 8-wide fp32 FMAs held in registers (AVX2+FMA when the CPU
//    has them, else 4-wide SSE2 multiply + add), counted 2 FLOPs per lane per FMA;
//  * kernel GEMM peak: the selected kernel table's own fp8_gemm (the format of the attention
//    projections and the shared expert) on a weight that stays in L2: the ceiling the engine's
//    GEMMs reach when they are not waiting on memory (reference kernels: exact products summed
//    in double lanes, far below the FMA peak by design).
// Each probe returns the median (and spread) of several timed passes.
#pragma once

#include <string>
#include <vector>

namespace cedar {
class ThreadPool;
struct KernelTable;
}  // namespace cedar

namespace cedar::bench {

struct Probe {
  double median = 0;  // bytes/s or FLOP/s
  double min = 0, max = 0;
  int passes = 0;
  int threads = 0;
  std::string method;  // one line saying what was measured
};

// Median of a non-empty sample (mean of the two middle values for an even count).
double median(std::vector<double> v);

// bytes: buffer size (rounded down to a multiple of 64 per thread); passes >= 1 (after a warmup).
Probe measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes);
Probe measure_fma_peak(ThreadPool& pool, int passes);
Probe measure_kernel_gemm_peak(ThreadPool& pool, const KernelTable& k, int passes);

}  // namespace cedar::bench
