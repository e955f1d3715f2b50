#include "forward/moe.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>

#include "base/scratch.h"
#include "numerics/bf16.h"
#include "numerics/fmath.h"

namespace cedar {

MoE::MoE(const ModelConfig& cfg, int layer, const LayerWeights& w)
    : cfg_(cfg),
      w_(w),
      layer_(layer),
      E_(cfg.experts_of(layer)),
      K_(cfg.experts_per_tok_of(layer)) {}

void MoE::gate(const Ctx& ctx, const float* x, int n, int* idx, float* weight,
               const uint8_t* image) const {
  const int E = E_, K = K_;
  Scratch<float> logit(size_t(n) * size_t(E));
  linear(ctx, w_.gate, x, n, logit.data(), LinearOut::kF32);  // fp32 router
  const float temp = float(cfg_.gate_temp);
  const float route_scale = float(cfg_.routed_scaling_factor);
  for (int i = 0; i < n; ++i) {
    Scratch<float> s(static_cast<size_t>(E)), biased(static_cast<size_t>(E));
    const float* bias = image && image[i] ? w_.gate_bias_vl : w_.gate_bias;
    if (!bias) throw std::runtime_error("an image row in a model without ffn.gate.bias_vl");
    for (int e = 0; e < E; ++e) {
      float lg = logit[size_t(i) * E + e];
      if (temp != 1.0f) lg = lg / temp;
      s[size_t(e)] = fmath::sqrt(fmath::softplus(lg));  // sqrtsoftplus
      biased[size_t(e)] = s[size_t(e)] + bias[e];
    }
    int* sel = idx + size_t(i) * K;
    ctx.k.topk(biased.data(), E, K, sel);  // ascending expert index
    float* wt = weight + size_t(i) * K;
    double sum = 0;
    for (int j = 0; j < K; ++j) {
      wt[j] = s[size_t(sel[j])];  // weights from the unbiased scores
      sum += double(wt[j]);
    }
    if (cfg_.norm_topk_prob && K > 1) {
      const float den = fmath::round_sum(sum) + 1e-20f;  // not norm_eps: matches training
      for (int j = 0; j < K; ++j) wt[j] = wt[j] / den;
    }
    for (int j = 0; j < K; ++j) wt[j] = wt[j] * route_scale;
  }
}

namespace {
std::atomic<int64_t> g_routed_runs{0};
}  // namespace

int64_t routed_expert_runs() { return g_routed_runs.load(std::memory_order_relaxed); }

// The next layer's experts are guessed for passes of up to this many rows (decode steps and
// small batches); a larger pass reads most experts of every layer anyway.
constexpr int kGuessRows = 8;

// The next layer's router on this layer's FFN input: the union of the rows' top-k, prefetched
// after this layer's own reads (a quarter of the cache at most).
void MoE::prefetch_next(const Ctx& ctx, const float* x, int n) const {
  const int K = next_->K_;
  Scratch<int> idx(size_t(n) * size_t(K));
  Scratch<float> wt(idx.size());
  next_->gate(ctx, x, n, idx.data(), wt.data());
  std::vector<char> want(size_t(next_->E_), 0);
  for (int v : idx) want[size_t(v)] = 1;
  Scratch<int> ids;
  for (int e = 0; e < next_->E_; ++e)
    if (want[size_t(e)] && int(ids.size()) < std::max(1, ctx.experts->capacity() / 4))
      ids.push_back(e);
  ctx.experts->prefetch(next_->layer_, ids.data(), int(ids.size()), /*guess=*/true);
}

void MoE::forward(const Ctx& ctx, const float* x, int n, float* out, const uint8_t* image) const {
  const int D = cfg_.hidden_size, E = E_, K = K_;
  const int I = cfg_.moe_intermediate_size;
  Scratch<int> idx(size_t(n) * size_t(K));
  Scratch<float> wt(idx.size());
  gate(ctx, x, n, idx.data(), wt.data(), image);

  // The experts that received rows (ascending index), then the shared expert last, each with
  // its rows, routing weights and buffers.
  struct Job {
    const ExpertWeights* w = nullptr;
    Scratch<int> rows;  // empty for the shared expert: all rows
    Scratch<float> weight;
    PreparedRows x, a;
    Scratch<float> g, u, y;
    int m = 0;
  };
  std::vector<Job> jobs;
  jobs.reserve(size_t(std::min(E, n * K)) + 1);
  for (int e = 0; e < E; ++e) {
    Job j;
    for (int i = 0; i < n; ++i)
      for (int s = 0; s < K; ++s)
        if (idx[size_t(i) * K + s] == e) {
          j.rows.push_back(i);
          j.weight.push_back(wt[size_t(i) * K + s]);
        }
    if (j.rows.empty()) continue;
    j.w = &w_.experts[size_t(e)];
    j.m = int(j.rows.size());
    jobs.push_back(std::move(j));
  }
  g_routed_runs.fetch_add(int64_t(jobs.size()), std::memory_order_relaxed);
  jobs.emplace_back();
  jobs.back().w = &w_.shared;
  jobs.back().m = n;

  // every row prepared (act_quant) once per weight format, then gathered per expert (the
  // bound weights name the format: their bytes are not read here)
  PreparedRows px[kWeightFormats];
  auto prepared = [&](WeightFormat f) -> const PreparedRows& {
    PreparedRows& p = px[int(f)];
    if (!p.family) prepare_rows(ctx, f, x, n, D, p);
    return p;
  };
  for (Job& j : jobs)
    if (!j.rows.empty()) gather_rows(prepared(j.w->w1.format()), j.rows.data(), j.m, j.x);
  const float L = float(cfg_.swiglu_limit);
  // the experts of jobs [b, e): gate and up projections in one parallel region (w1 and w3 read
  // one copy of the input), the activation, the down projections in another
  auto run = [&](size_t b, size_t e) {
    Scratch<GemmTask> tasks;
    for (size_t k = b; k < e; ++k) {
      Job& j = jobs[k];
      const PreparedRows& xj = j.rows.empty() ? prepared(j.w->w1.format()) : j.x;
      j.g.resize(size_t(j.m) * I);
      j.u.resize(j.g.size());
      tasks.push_back({&j.w->w1, &xj, j.g.data()});
      tasks.push_back({&j.w->w3, &xj, j.u.data()});
    }
    linear_group(ctx, tasks);
    // ref: model.py Expert.forward between the projections; in place: the bf16 activation
    // replaces the gate row
    for (size_t k = b; k < e; ++k) {
      Job& j = jobs[k];
      const bool routed = !j.rows.empty();
      for (int i = 0; i < j.m; ++i)
        ctx.k.swiglu(j.g.data() + size_t(i) * I, j.u.data() + size_t(i) * I, I, L, routed,
                     routed ? j.weight[size_t(i)] : 1.0f, j.g.data() + size_t(i) * I);
      prepare_rows(ctx, j.w->w2.format(), j.g.data(), j.m, I, j.a);
    }
    tasks.clear();
    for (size_t k = b; k < e; ++k) {
      Job& j = jobs[k];
      j.y.resize(size_t(j.m) * D);
      tasks.push_back({&j.w->w2, &j.a, j.y.data()});
    }
    linear_group(ctx, tasks);
  };
  const size_t routed = jobs.size() - 1;
  if (!ctx.experts) {
    run(0, jobs.size());
  } else {
    // streamed experts: groups of at most the source's capacity, each pinned for its GEMMs;
    // the first group's reads start now and overlap the shared expert (resident), which runs
    // first (the output sums keep their order: they run after every group)
    const size_t cap = size_t(ctx.experts->capacity());
    auto ids_of = [&](size_t b, size_t e) {
      Scratch<int> ids;
      for (size_t k = b; k < e; ++k) ids.push_back(int(jobs[k].w - w_.experts.data()));
      return ids;
    };
    {
      const Scratch<int> first = ids_of(0, std::min(routed, cap));
      ctx.experts->prefetch(layer_, first.data(), int(first.size()));
    }
    if (next_ && n <= kGuessRows) prefetch_next(ctx, x, n);
    run(routed, jobs.size());
    for (size_t b = 0; b < routed; b += cap) {
      const size_t e = std::min(routed, b + cap);
      const Scratch<int> ids = ids_of(b, e);
      Scratch<const ExpertWeights*> ws(e - b);
      ctx.experts->acquire(layer_, ids.data(), int(ids.size()), ws.data());
      for (size_t k = b; k < e; ++k) jobs[k].w = ws[k - b];
      try {
        run(b, e);
      } catch (...) {
        ctx.experts->release(layer_, ids.data(), int(ids.size()));
        throw;
      }
      ctx.experts->release(layer_, ids.data(), int(ids.size()));
    }
  }

  // routed outputs in ascending expert index (the reference's y[idx] += expert(...)), then the
  // shared expert, in fp32
  Scratch<float> acc(size_t(n) * size_t(D), 0.0f);
  for (size_t k = 0; k + 1 < jobs.size(); ++k) {
    const Job& j = jobs[k];
    for (int r = 0; r < j.m; ++r) {
      float* a = acc.data() + size_t(j.rows[size_t(r)]) * D;
      const float* y = j.y.data() + size_t(r) * D;
      for (int d = 0; d < D; ++d) a[d] = a[d] + y[d];
    }
  }
  const Scratch<float>& ys = jobs.back().y;
  for (size_t i = 0; i < acc.size(); ++i) out[i] = round_bf16(acc[i] + ys[i]);
}

}  // namespace cedar
