// Token sampling over one row of logits: greedy, temperature, top-k, top-p, min-p, with a
// counter-based random source keyed by (seed, position), so a sample depends only on the logits,
// the parameters, the seed and the absolute position of the token being chosen -- never on the
// thread count, batching, chunking or how many samples were drawn before.
//
// Pipeline (always in this order; docs/RUNNING.md):
//   0. penalties     (Generator, apply_penalties) logit_i -= frequency * c_i + presence * [c_i > 0]
//                    with c_i the count of token i among the completion's tokens so far
//   1. temperature   z_i = logit_i / T             (T <= 0: greedy argmax, ties -> lowest id)
//   2. top-k         keep the k largest z (ties -> lower id first); k <= 0 disables
//   3. softmax       p_i = exp(z_i - max z) / sum, in double, over the kept tokens
//   4. top-p         in the order of p descending (ties -> lower id), keep the shortest prefix
//                    whose cumulative mass reaches top_p (at least one token); top_p >= 1
//                    disables
//   5. min-p         keep tokens with p_i >= min_p * max p; min_p <= 0 disables
//   6. sample        u = uniform[0,1) from (seed, position); walk the kept tokens in ascending
//                    id order and return the first whose cumulative mass exceeds u * (kept mass)
// Steps 2-5 never sort the whole row (a vocabulary of 129,280 ids): top-k keeps a heap of k,
// top-p sorts only the tokens near its cut (sampler.cpp), min-p is a threshold.
// Non-finite logits: -inf is a token of probability 0; NaN or +inf is an error.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cedar::runtime {

struct SamplingParams {
  double temperature = 1.0;  // <= 0: greedy
  int top_k = 0;             // <= 0: off; 1 is greedy
  double top_p = 1.0;        // in (0, 1]; 1: off
  double min_p = 0.0;        // in [0, 1]; 0: off
  uint64_t seed = 0;
  double frequency_penalty = 0.0;  // in [-2, 2]; per earlier occurrence in the completion
  double presence_penalty = 0.0;   // in [-2, 2]; once for any earlier occurrence

  bool has_penalties() const { return frequency_penalty != 0.0 || presence_penalty != 0.0; }
  bool greedy() const { return temperature <= 0.0 || top_k == 1; }
  // Throws std::invalid_argument naming the parameter when out of range.
  void validate() const;
};

// A token and its probability after the filters (renormalised over the kept tokens).
struct Candidate {
  int32_t id = 0;
  double p = 0.0;
};

// The uniform [0, 1) number used to sample the token at `position` (53-bit, SplitMix64-style
// mixing of seed and position: a pure function).
double sample_uniform(uint64_t seed, uint64_t position);

// Steps 1-5: the kept tokens in ascending id order with renormalised probabilities. For greedy
// params this is the single argmax with p = 1. Throws std::runtime_error on NaN/+inf logits or an
// empty row.
std::vector<Candidate> sampling_candidates(std::span<const float> logits, const SamplingParams& p);

// Step 6 with an explicit u in [0, 1).
int32_t pick_candidate(const std::vector<Candidate>& cands, double u);

// Step 0 (OpenAI's formula): logits[t] -= frequency_penalty * counts(t) + presence_penalty for
// every token t with counts(t) > 0. counts: token -> occurrences.
void apply_penalties(std::span<float> logits, const std::unordered_map<int32_t, int>& counts,
                     const SamplingParams& p);

// The log-probabilities OpenAI's `logprobs` reports for a chosen token: log-softmax (in double)
// of the row the sampler saw (after penalties, before temperature and the filters), for `id` and
// the `top_n` most likely tokens (descending, ties -> lower id).
struct TokenLogprobs {
  int32_t id = 0;
  double logprob = 0.0;
  std::vector<std::pair<int32_t, double>> top;
};
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t id, int top_n);

// Argmax, ties to the lowest id.
int32_t argmax(std::span<const float> logits);

// The whole pipeline for the token at absolute sequence position `position`.
class Sampler {
 public:
  explicit Sampler(SamplingParams p) : p_(p) { p_.validate(); }
  const SamplingParams& params() const { return p_; }
  int32_t sample(std::span<const float> logits, int64_t position) const;

 private:
  SamplingParams p_;
};

}  // namespace cedar::runtime
