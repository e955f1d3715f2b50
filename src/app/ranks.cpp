#include "app/ranks.h"

#include <cstdio>
#include <stdexcept>

#include "dist/mpi_link.h"
#include "state/snapshot.h"

namespace cedar::app {

std::vector<Args::Option> with_rank_options(std::vector<Args::Option> options) {
  options.insert(
      options.end(),
      {{"ranks", "", false,
        "run as one rank of an MPI job (mpirun -np N), the layers split into N pipeline stages"},
       {"stage-cuts", "", true,
        "--ranks: the first layer of ranks 1..N-1, comma-separated (default: balanced by "
        "weight bytes)"},
       {"rank-timeout", "", true,
        "--ranks: seconds a rank may take to answer before it counts as dead (default 300)"}});
  return options;
}

void layer_weight_bytes(const Checkpoint& ckpt, std::vector<uint64_t>& layers, uint64_t& other) {
  layers.assign(size_t(ckpt.config().num_hidden_layers), 0);
  other = 0;
  auto add = [&](const std::string& name, size_t bytes) {
    if (name.rfind("layers.", 0) == 0) {
      const size_t dot = name.find('.', 7);
      const int l = std::atoi(name.substr(7, dot - 7).c_str());
      if (l >= 0 && size_t(l) < layers.size()) {
        layers[size_t(l)] += bytes;
        return;
      }
    }
    other += bytes;
  };
  for (const auto& [name, t] : ckpt.tensors()) add(name, t.nbytes);
  for (const auto& [name, b] : ckpt.block_weights()) add(name, b.nbytes);
}

std::unique_ptr<Ranks> Ranks::join(const Args& args) {
  if (!args.has("ranks")) {
    if (args.has("stage-cuts") || args.has("rank-timeout"))
      throw std::runtime_error("--stage-cuts and --rank-timeout need --ranks");
    return nullptr;
  }
  // The memory plan counts the whole checkpoint and every layer's KV; a rank maps and touches
  // only its own layers' pages, so a budget planned for the whole model would be wrong.
  if (args.has("mem-budget") || args.has("kv-ram"))
    throw std::runtime_error(
        "--mem-budget and --kv-ram plan the whole model and do not work with --ranks yet (each "
        "rank maps the checkpoint and reads only its layers' pages; leave them out)");
  const double timeout = args.get_double("rank-timeout", 300);
  if (!(timeout > 0) || timeout > 86400)
    throw std::runtime_error("--rank-timeout must be a number of seconds in (0, 86400]");
  auto r = std::unique_ptr<Ranks>(new Ranks);
  r->link_ = std::make_unique<dist::MpiLink>(timeout);
  return r;
}

std::unique_ptr<Ranks> Ranks::start(const Args& args, const std::string& model_dir,
                                    const Checkpoint& ckpt, const KernelTable& kernels,
                                    const std::string& version) {
  auto r = join(args);
  if (r) r->check(args, model_dir, ckpt, kernels, version);
  return r;
}

void Ranks::check(const Args& args, const std::string& model_dir, const Checkpoint& ckpt,
                  const KernelTable& kernels, const std::string& version) {
  // the same checkpoint, kernels and build on every rank, or no rank starts
  const std::string kname(kernels.name);
  const std::string id = fingerprint_hex(model_fingerprint(model_dir, {}, kname)) + " kernels " +
                         kname + ", cedar " + version;
  const std::vector<std::string> all = link_->allgather(id);
  std::string diff;
  for (size_t k = 1; k < all.size(); ++k)
    if (all[k] != all[0]) diff += "; rank " + std::to_string(k) + ": " + all[k];
  if (!diff.empty()) {
    link_->forget_workers();
    throw std::runtime_error(
        "--ranks: the ranks hold different checkpoints, kernels or cedar "
        "versions (rank 0: " +
        all[0] + diff + ")");
  }
  const ModelConfig& cfg = ckpt.config();
  if (args.has("stage-cuts")) {
    split_ = StageSplit::parse(args.get("stage-cuts"), cfg.num_hidden_layers, size());
  } else {
    std::vector<uint64_t> layers;
    uint64_t other = 0;
    layer_weight_bytes(ckpt, layers, other);
    split_ = StageSplit::by_bytes(layers, other, size());
  }
}

bool Ranks::attach(runtime::Engine& engine) {
  engine.set_stage(split_, link_.get());
  if (rank() == 0) return true;
  dist::serve_stage(*link_, engine.model());
  return false;
}

bool Ranks::attach(Transformer& model) {
  model.set_stage(split_, link_.get());
  if (rank() == 0) return true;
  dist::serve_stage(*link_, model);
  return false;
}

std::string Ranks::describe(const ModelConfig& cfg) const {
  std::string s = std::to_string(size()) + " ranks, layers " + split_.describe();
  for (int r = 1; r < size(); ++r) {
    const int cut = split_.begin(r);
    const Crossing x = crossing(cfg, cut);
    s += "; cut " + std::to_string(cut) + " carries the stream";
    for (int l : x.kv_sources) s += ", layer " + std::to_string(l) + "'s KV rows";
    for (int l : x.topk_sources) s += ", layer " + std::to_string(l) + "'s Top-K";
    if (x.candidates) s += ", the candidate pool";
  }
  return s;
}

nlohmann::json Ranks::traffic_json(const std::vector<dist::MpiLink::Sent>& before,
                                   const std::vector<dist::MpiLink::Sent>& after,
                                   int64_t tokens) const {
  nlohmann::json out = nlohmann::json::array();
  for (int r = 0; r < size(); ++r) {
    const int to = r + 1 < size() ? r + 1 : 0;
    const uint64_t bytes = after[size_t(r)].bytes - before[size_t(r)].bytes;
    const uint64_t msgs = after[size_t(r)].messages - before[size_t(r)].messages;
    out.push_back({{"from_rank", r},
                   {"to_rank", to},
                   {"cut", to ? nlohmann::json(split_.begin(to)) : nlohmann::json(nullptr)},
                   {"bytes_per_token", double(bytes) / double(std::max<int64_t>(1, tokens))},
                   {"messages", msgs}});
  }
  return out;
}

std::string Ranks::traffic(int64_t tokens) const {
  const std::vector<dist::MpiLink::Sent> none(static_cast<size_t>(size()));
  std::string s;
  char buf[160];
  for (const nlohmann::json& h : traffic_json(none, link_->hop_traffic(), tokens)) {
    const int from = h["from_rank"], to = h["to_rank"];
    const std::string what =
        to ? "cut " + std::to_string(int(h["cut"])) : std::string("the head's rows");
    std::snprintf(buf, sizeof buf, "%s%s (rank %d -> %d): %.0f bytes/token in %llu messages",
                  from ? "; " : "", what.c_str(), from, to, double(h["bytes_per_token"]),
                  (unsigned long long)h["messages"].get<uint64_t>());
    s += buf;
  }
  return s;
}

}  // namespace cedar::app
