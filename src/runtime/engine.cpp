#include "runtime/engine.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "forward/vision_tower.h"
#include "runtime/model_tokenizer.h"
#include "text/dsml.h"
#include "text/engram_token_map.h"

namespace cedar::runtime {

std::unique_ptr<Engine> Engine::load(const EngineOptions& opt) {
  if (opt.model_dir.empty()) throw std::runtime_error("no model directory given");
  std::unique_ptr<Engine> e(new Engine());
  e->opt_ = opt;
  const KernelTable& kernels = choose_kernels(opt.kernels);
  e->kernels_ = &kernels;
  e->ckpt_ = Checkpoint::open(opt.model_dir, {.blocks_in_place = !opt.gguf_requant});
  const ModelConfig& cfg = e->ckpt_->config();
  MemoryRequest mem = opt.memory;
  mem.q8_head = opt.head_type == HeadType::kQ8;
  e->plan_ = plan_memory(*e->ckpt_, mem);
  if (!e->plan_.refusal.empty()) throw std::runtime_error(e->plan_.refusal);

  e->tok_ = std::make_unique<text::Tokenizer>(load_tokenizer(*e->ckpt_, opt.tokenizer_path));
  std::vector<int32_t> token_map = engram_token_map(*e->ckpt_, *e->tok_);
  e->pool_ = std::make_unique<ThreadPool>(opt.threads);
  e->model_ = std::make_unique<Transformer>(*e->ckpt_, kernels, *e->pool_, std::move(token_map),
                                            opt.head_type);
  if (e->plan_.streamed) {
    e->experts_ = std::make_unique<ExpertCache>(
        *e->ckpt_, e->model_->weights(), size_t(e->plan_.expert_cache), e->plan_.min_expert_slots,
        1 << 30, opt.expert_policy);
    e->model_->set_expert_source(e->experts_.get(), opt.expert_guess);
  }
  if (e->plan_.engram_streamed) {
    e->engram_ = std::make_unique<EngramStore>(*e->ckpt_, cfg, e->model_->weights(),
                                               size_t(e->plan_.engram_cache));
    e->model_->set_engram_store(e->engram_.get());
  }

  // v41-interface §2.5: stop on EOS; <｜User｜>/<｜Assistant｜> never belong inside an answer,
  // so they end it too (the `dsv4_multi_eos` safety some V4 servers use).
  if (cfg.eos_token_id >= 0 && cfg.eos_token_id < cfg.vocab_size)
    e->stop_ids_.push_back(int32_t(cfg.eos_token_id));
  for (std::string_view s : {text::kEos, text::kUserTok, text::kAssistantTok})
    if (auto id = e->tok_->token_to_id(s))
      if (std::find(e->stop_ids_.begin(), e->stop_ids_.end(), *id) == e->stop_ids_.end())
        e->stop_ids_.push_back(*id);
  return e;
}

Engine::~Engine() { batcher_.reset(); }

ForwardResult Engine::forward(SequenceState& state, const int32_t* ids, int n, int64_t first_pos,
                              const ForwardOptions& opt, float* logits) {
  if (batcher_) return batcher_->forward(state, ids, n, first_pos, opt, logits);
  std::lock_guard<std::mutex> lk(forward_mu_);
  return model_->forward(state, ids, n, first_pos, opt, logits);
}

Draft Engine::draft(const SequenceState& state, int32_t anchor, bool with_logits) {
  std::lock_guard<std::mutex> lk(forward_mu_);
  return model_->draft(state, anchor, with_logits);
}

std::vector<float> Engine::encode_image(const vision::ImagePatches& patches) {
  std::lock_guard<std::mutex> lk(forward_mu_);
  const Ctx ctx{*kernels_, *pool_, experts_.get(), engram_.get()};
  return cedar::encode_image(ctx, config(), model_->weights().vision, patches);
}

SpecPayoff Engine::spec_payoff() const {
  std::lock_guard<std::mutex> lk(payoff_mu_);
  return payoff_;
}

void Engine::set_spec_payoff(const SpecPayoff& p) {
  std::lock_guard<std::mutex> lk(payoff_mu_);
  payoff_ = p;
}

void Engine::enable_batching(BatcherOptions opt) {
  if (!batcher_) batcher_ = std::make_unique<ForwardBatcher>(*model_, forward_mu_, opt);
}

BatcherStats Engine::batcher_stats() const { return batcher_ ? batcher_->stats() : BatcherStats{}; }

bool Engine::is_stop_token(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

// Tokenizes a rendered prompt: template segments with added-token recognition, content as plain
// BPE (text::encode_prompt), keeping where generation starts and whether thinking is on.
Prompt Engine::prompt_from(text::RenderResult r) const {
  Prompt p;
  p.ids = text::encode_prompt(*tok_, r.segments);
  p.text = std::move(r.prompt);
  p.start = r.start;
  p.thinking = r.thinking;
  p.images = std::move(r.images);
  return p;
}

Prompt Engine::render_chat(const text::ChatRequest& req) const {
  return prompt_from(text::ChatEncoder().render(req));
}

Prompt Engine::render_request(const text::ojson& body) const {
  return prompt_from(text::ChatEncoder().render_request(body));
}

Prompt Engine::encode_raw(std::string_view text, bool add_bos) const {
  Prompt p;
  if (add_bos) {
    if (config().bos_token_id < 0 || config().bos_token_id >= config().vocab_size)
      throw std::runtime_error("config.json bos_token_id is outside the vocabulary");
    p.ids.push_back(int32_t(config().bos_token_id));
  }
  tok_->encode_append(text, /*allow_special=*/false, &p.ids);
  p.text = std::string(text);
  p.start = text::GenerationStart::kContent;
  return p;
}

const TokenTrie& Engine::token_trie() const {
  std::call_once(trie_once_, [this] { trie_ = std::make_unique<TokenTrie>(*tok_); });
  return *trie_;
}

}  // namespace cedar::runtime
