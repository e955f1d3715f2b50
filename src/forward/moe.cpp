#include "forward/moe.h"

#include <algorithm>
#include <vector>

#include "numerics/bf16.h"
#include "numerics/fmath.h"

namespace cedar {

MoE::MoE(const ModelConfig& cfg, int, const LayerWeights& w) : cfg_(cfg), w_(w) {}

void MoE::gate(const Ctx& ctx, const float* x, int n, int* idx, float* weight) const {
  const int E = cfg_.n_routed_experts, K = cfg_.num_experts_per_tok;
  std::vector<float> logit(size_t(n) * size_t(E));
  linear(ctx, w_.gate, x, n, logit.data(), LinearOut::kF32);  // fp32 router
  const float temp = float(cfg_.gate_temp);
  const float route_scale = float(cfg_.routed_scaling_factor);
  for (int i = 0; i < n; ++i) {
    std::vector<float> s(static_cast<size_t>(E)), biased(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) {
      float lg = logit[size_t(i) * E + e];
      if (temp != 1.0f) lg = lg / temp;
      s[size_t(e)] = fmath::sqrt(fmath::softplus(lg));  // sqrtsoftplus
      biased[size_t(e)] = s[size_t(e)] + w_.gate_bias[e];
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

void MoE::expert(const Ctx& ctx, const ExpertWeights& e, const float* x, int m,
                 const float* weights, float* y) const {
  const int I = e.w1.out;
  std::vector<float> g(size_t(m) * size_t(I)), u(g.size());
  linear(ctx, e.w1, x, m, g.data());
  linear(ctx, e.w3, x, m, u.data());
  const float L = float(cfg_.swiglu_limit);
  for (int i = 0; i < m; ++i)  // in place: the bf16 activation replaces the gate row
    ctx.k.swiglu(g.data() + size_t(i) * I, u.data() + size_t(i) * I, I, L, weights != nullptr,
                 weights ? weights[i] : 1.0f, g.data() + size_t(i) * I);
  linear(ctx, e.w2, g.data(), m, y);
}

void MoE::forward(const Ctx& ctx, const float* x, int n, float* out) const {
  const int D = cfg_.hidden_size, E = cfg_.n_routed_experts, K = cfg_.num_experts_per_tok;
  std::vector<int> idx(size_t(n) * size_t(K));
  std::vector<float> wt(idx.size());
  gate(ctx, x, n, idx.data(), wt.data());
  std::vector<float> acc(size_t(n) * size_t(D), 0.0f);  // fp32 accumulator
  std::vector<float> xe, we, ye;
  std::vector<int> rows;
  // routed experts in ascending index: each row's sum follows its experts' index order
  for (int e = 0; e < E; ++e) {
    rows.clear();
    we.clear();
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < K; ++j)
        if (idx[size_t(i) * K + j] == e) {
          rows.push_back(i);
          we.push_back(wt[size_t(i) * K + j]);
        }
    if (rows.empty()) continue;
    const int m = int(rows.size());
    xe.resize(size_t(m) * D);
    ye.resize(size_t(m) * D);
    for (int r = 0; r < m; ++r)
      std::copy_n(x + size_t(rows[size_t(r)]) * D, D, xe.data() + size_t(r) * D);
    expert(ctx, w_.experts[size_t(e)], xe.data(), m, we.data(), ye.data());
    for (int r = 0; r < m; ++r) {
      float* a = acc.data() + size_t(rows[size_t(r)]) * D;
      for (int d = 0; d < D; ++d) a[d] = a[d] + ye[size_t(r) * D + d];
    }
  }
  ye.resize(size_t(n) * D);
  expert(ctx, w_.shared, x, n, nullptr, ye.data());
  for (size_t i = 0; i < acc.size(); ++i) out[i] = round_bf16(acc[i] + ye[i]);
}

}  // namespace cedar
