#include "server/info_api.h"

#include <string>
#include <vector>

namespace cedar::server {

namespace {

bool flag(const ojson& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) throw ApiError(400, std::string(key) + " must be a boolean", key);
  return it->get<bool>();
}

ojson sampling_json(const SamplingOptions& s) {
  return {{"temperature", s.temperature},
          {"top_p", s.top_p},
          {"top_k", s.top_k},
          {"min_p", s.min_p},
          {"frequency_penalty", s.frequency_penalty},
          {"presence_penalty", s.presence_penalty}};
}

}  // namespace

ojson props_body(const ApiContext& ctx) {
  const ModelConfig& c = ctx.engine.config();
  ojson params = sampling_json(ctx.cfg.sampling);
  params["source"] = ctx.cfg.sampling_source.empty() ? "built in" : ctx.cfg.sampling_source;
  params["max_tokens"] = ctx.cfg.default_max_tokens;
  params["n_predict"] = ctx.cfg.default_max_tokens;  // (llama-server's name)
  return {{"model", ctx.cfg.model_name},
          {"model_path", ctx.cfg.model_path},
          {"default_generation_settings",
           {{"n_ctx", ctx.scheduler.ctx_size()}, {"params", std::move(params)}}},
          {"total_slots", ctx.scheduler.slot_count()},
          {"n_ctx_train", c.max_position_embeddings},
          {"n_vocab", c.vocab_size},
          {"modalities", {{"vision", c.has_vision}, {"audio", false}}},
          {"build_info", ctx.cfg.version}};
}

ojson tokenize_body(const runtime::Engine& engine, const ojson& body) {
  const auto it = body.find("content");
  if (it == body.end() || !it->is_string())
    throw ApiError(400, "content must be a string", "content");
  const text::Tokenizer& tok = engine.tokenizer();
  std::vector<int32_t> ids;
  if (flag(body, "add_special")) ids.push_back(int32_t(engine.config().bos_token_id));
  tok.encode_append(it->get_ref<const std::string&>(), flag(body, "parse_special"), &ids);
  ojson tokens = ojson::array();
  const bool pieces = flag(body, "with_pieces");
  for (int32_t id : ids) {
    if (!pieces) {
      tokens.push_back(id);
      continue;
    }
    const int32_t one[1] = {id};
    tokens.push_back({{"id", id}, {"piece", tok.decode(one)}});
  }
  return {{"tokens", std::move(tokens)}};
}

ojson detokenize_body(const runtime::Engine& engine, const ojson& body) {
  const auto it = body.find("tokens");
  if (it == body.end() || !it->is_array())
    throw ApiError(400, "tokens must be an array of token ids", "tokens");
  const int64_t vocab = engine.config().vocab_size;
  std::vector<int32_t> ids;
  ids.reserve(it->size());
  for (const ojson& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
      throw ApiError(
          400, "tokens must hold token ids in [0, " + std::to_string(vocab) + "), got " + v.dump(),
          "tokens");
    ids.push_back(int32_t(v.get<int64_t>()));
  }
  return {{"content", engine.tokenizer().decode(ids)}};
}

ojson version_body(const ApiContext& ctx) {
  return {{"version", ctx.cfg.version}, {"model", ctx.cfg.model_name}};
}

ojson slots_body(const ApiContext& ctx) {
  ojson out = ojson::array();
  for (const Scheduler::SlotInfo& s : ctx.scheduler.slot_info())
    out.push_back({{"id", s.id},
                   {"is_processing", s.busy},
                   {"state", s.busy ? "processing" : "idle"},
                   {"n_ctx", ctx.scheduler.ctx_size()},
                   {"prompt_tokens", s.prompt_tokens},
                   {"cached_tokens", s.held_tokens}});
  return out;
}

}  // namespace cedar::server
