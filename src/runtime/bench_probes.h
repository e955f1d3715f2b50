// Machine ceilings for `cedar bench`, measured in the same run as the model timings (these
// machines are noisy: a ceiling measured an hour earlier is not the one the model ran against).
//  * read bandwidth (STREAM-like, read only): every thread of the pool streams its own page-
//    aligned slice of a buffer much larger than the last-level cache (first-touched by the same
//    thread, so its pages sit on that thread's memory node) with the widest vector loads the CPU
//    has, into 8 independent 64-bit integer accumulators, 512 bytes (8 cache lines) per loop
//    iteration: loads + adds only, so the loop is bound by memory, not by a dependency chain;
//  * FMA peak: one probe per vector width the CPU runs (SSE2 multiply + add, AVX2 8-wide FMA,
//    AVX-512 16-wide FMA), each with 12 independent register-resident chains per thread (covers
//    a 4-6 cycle latency on two pipes), counted 2 FLOPs per lane; the best width is the peak;
//  * dot-product peaks: the bf16 and int8 dot-product instructions the CPU has, the same way
//    (a fast table that multiplies with them can pass the fp32 FMA peak);
//  * kernel GEMM peak: the selected kernel table's own fp8_gemm (the format of the attention
//    projections and the shared expert) on a weight that stays in L2: the ceiling the engine's
//    GEMMs reach when they are not waiting on memory (reference kernels: exact products summed
//    in double lanes, far below the FMA peak by design).
// Each probe returns the median (and spread) of several timed passes after one warmup pass.
// The CPU is never assumed: widths come from cedar::cpu_features(), and asking for a width the
// CPU cannot run throws instead of faulting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cedar {
class ThreadPool;
struct KernelTable;
}  // namespace cedar

namespace cedar::bench {

// Vector widths of the probes, narrowest first. kPortable: plain C++ (non-x86 builds only).
enum class Simd { kPortable, kSse2, kAvx2, kAvx512 };

const char* simd_name(Simd w);  // "portable", "SSE2", "AVX2", "AVX-512"
// The widths this CPU (and OS) runs, narrowest first; never empty.
std::vector<Simd> simd_widths();
Simd widest_simd();

struct Probe {
  double median = 0;  // bytes/s or FLOP/s
  double min = 0, max = 0;
  int passes = 0;
  int threads = 0;
  std::string width;   // simd_name() of the width measured, or the kernel table's name
  std::string method;  // one line saying what was measured
};

// Median of a non-empty sample (mean of the two middle values for an even count).
double median(std::vector<double> v);

// bytes: buffer size, rounded down to a multiple of 4 KiB per thread (throws when that is 0);
// passes >= 1 (after a warmup). The first form uses widest_simd().
Probe measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes);
Probe measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes, Simd width);

// The read-bandwidth probe's buffer, kept for passes taken between other timings: `cedar bench`
// reads it between decode steps, so that a decode's ratio is taken against the bandwidth the
// machine offered while it ran (a shared host's read bandwidth moves by 2x within minutes).
class ReadProbe {
 public:
  ReadProbe(ThreadPool& pool, size_t bytes, Simd width);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;
  double pass();  // one timed pass over the buffer (the first is made, untimed, at construction)
  // the passes taken so far (none: throws)
  Probe summary() const;

 private:
  void read_all();
  ThreadPool& pool_;
  Simd width_;
  size_t words_per_thread_ = 0;
  uint64_t* buf_ = nullptr;
  std::vector<double> rates_;
};

// One width; iters: loop iterations per thread per pass (each runs 12 vector FMAs or
// multiply + add pairs). Throws when the CPU lacks the width.
constexpr int64_t kFmaProbeIters = 8000000;
Probe measure_fma_peak(ThreadPool& pool, int passes, Simd width, int64_t iters = kFmaProbeIters);
// Every width of simd_widths(), narrowest first.
std::vector<Probe> measure_fma_peaks(ThreadPool& pool, int passes, int64_t iters = kFmaProbeIters);
// Dot-product peaks: one probe per dot-product instruction the CPU runs (VDPBF16PS with
// AVX512_BF16, VPDPBUSD with AVX512_VNNI; their `width` names the instruction), in the FMA
// probe's chains, 2 FLOPs per multiply-add (integer ones for VPDPBUSD). Empty when it has neither.
std::vector<Probe> measure_dot_peaks(ThreadPool& pool, int passes, int64_t iters = kFmaProbeIters);
// The probe with the highest median (probes non-empty): the "FMA peak" of the ratios.
const Probe& best_probe(const std::vector<Probe>& probes);

Probe measure_kernel_gemm_peak(ThreadPool& pool, const KernelTable& k, int passes);

// Storage read bandwidth as a streamed run reads: `ranges` of `path` (an expert's bytes each),
// split over `threads` threads reading at once, with direct I/O of the pages around each range
// where the file system allows it (as the expert cache reads), else with pread after asking the
// kernel to drop its cached pages (so the bytes come from the device). passes >= 1, no warmup
// (a warm pass would read the page cache).
struct ByteRange {
  uint64_t offset = 0, n = 0;
};
Probe measure_storage_read(const std::string& path, const std::vector<ByteRange>& ranges,
                           int threads, int passes);

}  // namespace cedar::bench
