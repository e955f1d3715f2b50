// `--ranks`: a command (logits, bench, run) run as one rank of an MPI job, the model split into
// pipeline stages (forward/stage.h, docs/DISTRIBUTED.md):
//   mpirun -np 2 cedar bench -m DIR --ranks [--stage-cuts 20] [--rank-timeout S]
// Every rank runs the same command line against its own copy of the checkpoint; rank 0 runs the
// command, the others serve their layers until it ends.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/args.h"
#include "dist/mpi_link.h"
#include "forward/stage.h"
#include "forward/transformer.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint.h"
#include "runtime/engine.h"

namespace cedar::app {

// A command's options plus those of running on ranks.
std::vector<Args::Option> with_rank_options(std::vector<Args::Option> options);

class Ranks {
 public:
  // nullptr without --ranks. Otherwise joins the MPI job and refuses (every rank throws, naming
  // the ranks that differ) unless all ranks hold the same checkpoint (model_fingerprint of
  // model_dir), kernel table and cedar version.
  static std::unique_ptr<Ranks> start(const Args& args, const std::string& model_dir,
                                      const Checkpoint& ckpt, const KernelTable& kernels,
                                      const std::string& version);
  // start() in two steps, for a command that must know its rank before it loads the model
  // (cedar serve: only rank 0 listens): join() the job (nullptr without --ranks), then check().
  static std::unique_ptr<Ranks> join(const Args& args);
  void check(const Args& args, const std::string& model_dir, const Checkpoint& ckpt,
             const KernelTable& kernels, const std::string& version);
  int rank() const { return link_->rank(); }
  int size() const { return link_->size(); }
  const StageSplit& split() const { return split_; }
  // Splits `model` (cuts by weight bytes unless --stage-cuts). Rank 0: returns true and the
  // command goes on. Other ranks: serve their layers until rank 0 ends, then return false (the
  // command returns 0 without output).
  bool attach(Transformer& model);
  bool attach(runtime::Engine& engine);
  // What each rank has handed on so far (MpiLink::hop_traffic), in rank order.
  std::vector<dist::MpiLink::Sent> sent() { return link_->hop_traffic(); }
  // The stage line for logs: "2 ranks, layers 0-1|2-6; cut 2 carries ..."
  std::string describe(const ModelConfig& cfg) const;
  // Rank 0, after the work: what each boundary carried, in bytes per token of `tokens`
  // ("cut 2 (rank 0 -> 1): 1.2 KB/token in 300 messages; ...", the last: rank N-1 -> 0).
  std::string traffic(int64_t tokens) const;
  // The same for the traffic between two sent() readings: one entry per boundary, rank order.
  nlohmann::json traffic_json(const std::vector<dist::MpiLink::Sent>& before,
                              const std::vector<dist::MpiLink::Sent>& after, int64_t tokens) const;

 private:
  std::unique_ptr<dist::MpiLink> link_;
  StageSplit split_;
};

// Per-layer bytes of a checkpoint's weights ("layers.<l>." tensors and block weights) and the
// bytes of everything else (embedding, head, DSpark, vision: rank 0's).
void layer_weight_bytes(const Checkpoint& ckpt, std::vector<uint64_t>& layers, uint64_t& other);

}  // namespace cedar::app
