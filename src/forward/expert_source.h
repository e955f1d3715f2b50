// ExpertSource: where the routed experts' weights come from when they are not all resident.
// Ctx::experts == nullptr: the mapped checkpoint (every expert readable at its bound address).
// Otherwise MoE::forward asks the source for the experts a pass selected, in groups of at most
// capacity(), right after the router, and releases each group after its GEMMs
// (forward/expert_cache.h reads them from the checkpoint's files into a RAM-budgeted cache).
// The bytes are the checkpoint's either way, so the products are the same bit for bit. Calls
// come from one forward at a time.
#pragma once

namespace cedar {

struct ExpertWeights;  // forward/weights.h

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  // The most experts one acquire() may ask for (>= 1).
  virtual int capacity() const = 0;
  // Experts ids[0..n) of MoE layer `layer` (a backbone layer, or num_hidden_layers + s for
  // DSpark stage s; distinct ids, n <= capacity()) made readable: out[i] is expert ids[i]'s
  // weights until the matching release(). Throws std::runtime_error naming the file on a read
  // error; nothing is acquired then.
  virtual void acquire(int layer, const int* ids, int n, const ExpertWeights** out) = 0;
  virtual void release(int layer, const int* ids, int n) = 0;
  // A hint that acquire(layer, ids, n) follows soon (right after the router, before the shared
  // expert runs; guess: ids are only a guess, made a layer earlier): reads of the missing
  // experts may start now. Never throws; a read error surfaces at acquire().
  virtual void prefetch(int /*layer*/, const int* /*ids*/, int /*n*/, bool /*guess*/ = false) {}
};

}  // namespace cedar
