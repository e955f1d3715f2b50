#include "forward/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "numerics/fmath.h"

namespace cedar {

RopeTable::RopeTable(int rd, double theta, bool yarn, double factor, double beta_fast,
                     double beta_slow, int64_t orig) {
  rope_dim_ = rd;
  freqs_.resize(size_t(rd / 2));
  const float th = float(theta);
  for (int k = 0; k < rd / 2; ++k) {
    const float e = float(2 * k) / float(rd);  // fp32 arange / dim
    const float p = fmath::pow(th, e);         // torch pow, correctly rounded
    freqs_[size_t(k)] = 1.0f / p;              // fp32 division
  }
  if (yarn && orig > 0) {
    // ref: model.py precompute_freqs_cis corrected_dim, in Python doubles
    auto cd = [&](double rot) {
      return rd * std::log(double(orig) / (rot * 2 * std::numbers::pi)) / (2 * std::log(theta));
    };
    const double low = std::max(std::floor(cd(beta_fast)), 0.0);
    const double high = std::min(std::ceil(cd(beta_slow)), double(rd - 1));
    const float denom = float(std::max(high - low, 1e-3));
    const float f = float(factor);
    for (int k = 0; k < rd / 2; ++k) {
      float ramp = (float(k) - float(low)) / denom;
      ramp = std::clamp(ramp, 0.0f, 1.0f);
      const float smooth = 1.0f - ramp;
      const float fr = freqs_[size_t(k)];
      freqs_[size_t(k)] = (fr / f) * (1.0f - smooth) + fr * smooth;
    }
  }
}

RopeTable RopeTable::for_layer(const ModelConfig& cfg, int ratio) {
  if (ratio == 0) return RopeTable(cfg.qk_rope_head_dim, cfg.rope_theta, false, 1, 0, 0, 0);
  return RopeTable(cfg.qk_rope_head_dim, cfg.compress_rope_theta, true, cfg.rope_factor,
                   cfg.beta_fast, cfg.beta_slow, cfg.original_max_position_embeddings);
}

void RopeTable::angles(int64_t pos, float* cos, float* sin) const {
  const float fp = float(pos);
  for (size_t k = 0; k < freqs_.size(); ++k) {
    const float a = fp * freqs_[k];
    cos[k] = fmath::cos(a);
    sin[k] = fmath::sin(a);
  }
}

}  // namespace cedar
