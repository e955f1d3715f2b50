#include "forward/weights.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

#include "numerics/bf16.h"
#include "numerics/fp8.h"

namespace cedar {

namespace {

const TensorView& need(const Checkpoint& ck, const std::string& name, DType dt,
                       const std::vector<int64_t>& shape) {
  const TensorView& t = ck.get(name);
  if (t.dtype != dt)
    throw std::runtime_error("tensor " + name + ": dtype " + dtype_name(t.dtype) + ", expected " +
                             dtype_name(dt));
  if (t.shape != shape)
    throw std::runtime_error("tensor " + name + ": shape " + shape_str(t.shape) + ", expected " +
                             shape_str(shape));
  return t;
}
// need() for the tensors read densely (all but the Engram tables' rows)
const TensorView& need_dense(const Checkpoint& ck, const std::string& name, DType dt,
                             const std::vector<int64_t>& shape) {
  const TensorView& t = need(ck, name, dt, shape);
  if (t.row_stride != 0)
    throw std::runtime_error("tensor " + name + ": strided rows where dense ones are read");
  return t;
}

// Safetensors packs tensors back to back, so a bf16 or fp32 tensor may start at any byte (the
// release has fp32 tensors at odd offsets): reading it through a typed pointer is undefined and
// slows vector loads. Such a tensor is copied once into 64-byte-aligned memory the weights own;
// large ones stay mapped when their element type is aligned (a copy would double their memory).
const uint8_t* aligned(ModelWeights& W, const TensorView& t) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(t.data);
  constexpr size_t kSmall = size_t(1) << 20;
  if (a % 64 == 0 || (t.nbytes > kSmall && a % dtype_size(t.dtype) == 0)) return t.data;
  return W.own_copy(t.data, t.nbytes);
}

const uint16_t* bf16_vec(ModelWeights& W, const Checkpoint& ck, const std::string& name,
                         const std::vector<int64_t>& shape) {
  return reinterpret_cast<const uint16_t*>(aligned(W, need_dense(ck, name, DType::BF16, shape)));
}
const float* f32_vec(ModelWeights& W, const Checkpoint& ck, const std::string& name,
                     const std::vector<int64_t>& shape) {
  return reinterpret_cast<const float*>(aligned(W, need_dense(ck, name, DType::F32, shape)));
}

// The kernel format of a GGUF block weight.
Linear::Kind block_kind(uint32_t ggml_type, const std::string& prefix) {
  WeightFormat f;
  if (!block_format(ggml_type, &f))
    throw std::runtime_error("tensor " + prefix + ".weight: GGUF type " +
                             std::to_string(ggml_type) + " has no kernel family");
  return Linear::Kind(int(f));
}

// `prefix.weight` (+ `prefix.scale` when quantized), or a GGUF block weight; the format follows
// the stored dtype.
Linear linear(ModelWeights& W, const Checkpoint& ck, const std::string& prefix, int out, int in) {
  Linear L;
  L.name = prefix;
  L.out = out;
  L.in = in;
  // Quantized projections are stored as `prefix` + `prefix.scale` (spec §13); bf16/f32 ones as
  // `prefix.weight`. Accept either spelling for the weight.
  if (const Checkpoint::BlockWeight* b = ck.block_weight(prefix + ".weight")) {
    if (b->out != out || b->in != in || in % 32)
      throw std::runtime_error("tensor " + prefix + ".weight: GGUF blocks [" +
                               std::to_string(b->out) + ", " + std::to_string(b->in) +
                               "], expected [" + std::to_string(out) + ", " + std::to_string(in) +
                               "]");
    L.kind = block_kind(b->ggml_type, prefix);
    L.w = b->data;
    return L;
  }
  const std::string wn = ck.has(prefix + ".weight") ? prefix + ".weight" : prefix;
  const TensorView& t = ck.get(wn);
  switch (t.dtype) {
    case DType::F8_E4M3: {
      if (in % 32) throw std::runtime_error("tensor " + wn + ": input width not a multiple of 32");
      L.kind = Linear::Kind::FP8;
      L.w = need_dense(ck, wn, DType::F8_E4M3, {out, in}).data;
      L.scale = need_dense(ck, prefix + ".scale", DType::F8_E8M0, {(out + 31) / 32, in / 32}).data;
      break;
    }
    case DType::I8:
    case DType::U8: {
      if (in % 32) throw std::runtime_error("tensor " + wn + ": input width not a multiple of 32");
      L.kind = Linear::Kind::FP4;
      L.w = need_dense(ck, wn, t.dtype, {out, in / 2}).data;
      L.scale = need_dense(ck, prefix + ".scale", DType::F8_E8M0, {out, in / 32}).data;
      break;
    }
    case DType::BF16:
      L.kind = Linear::Kind::BF16;
      L.w = aligned(W, need_dense(ck, wn, DType::BF16, {out, in}));
      break;
    case DType::F32:
      L.kind = Linear::Kind::F32;
      L.w = aligned(W, need_dense(ck, wn, DType::F32, {out, in}));
      break;
    default:
      throw std::runtime_error("tensor " + wn + ": unsupported dtype " + dtype_name(t.dtype));
  }
  return L;
}

Linear linear_of(ModelWeights& W, const Checkpoint& ck, const std::string& prefix, int out, int in,
                 Linear::Kind want) {
  Linear L = linear(W, ck, prefix, out, in);
  if (L.kind != want) throw std::runtime_error("tensor " + prefix + ": unexpected weight dtype");
  return L;
}

// wo_a: the FP8 weight dequantized to bf16 (exact: an E4M3 value times a power of two).
std::vector<uint16_t> dequant_fp8_to_bf16(const Linear& L) {
  std::vector<uint16_t> out(size_t(L.out) * size_t(L.in));
  const int kb = L.in / 32;
  for (int n = 0; n < L.out; ++n)
    for (int k = 0; k < L.in; ++k) {
      const float v = e4m3_to_f32(L.w[size_t(n) * size_t(L.in) + size_t(k)]) *
                      ue8m0_to_f32(L.scale[size_t(n / 32) * size_t(kb) + size_t(k / 32)]);
      out[size_t(n) * size_t(L.in) + size_t(k)] = f32_to_bf16_bits(v);
    }
  return out;
}

}  // namespace

const uint8_t* ModelWeights::own_copy(const uint8_t* p, size_t n) {
  std::shared_ptr<uint8_t> buf(
      static_cast<uint8_t*>(std::aligned_alloc(64, std::max<size_t>(64, (n + 63) / 64 * 64))),
      [](uint8_t* q) { std::free(q); });
  if (!buf) throw std::bad_alloc();
  std::memcpy(buf.get(), p, n);
  owned_.push_back(buf);
  return buf.get();
}

namespace {

// A release-layout Engram table: E4M3 codes and UE8M0 scales per row and 32 channels (a
// directory's two tensors, or two strided views of ds4's native rows).
void bind_engram_table(const Checkpoint& ck, const std::string& p, int64_t rows, int ehd,
                       LayerWeights& L) {
  const TensorView& codes = need(ck, p + "engram.embed.weight", DType::F8_E4M3, {rows, ehd});
  const TensorView& scales = need(ck, p + "engram.embed.scale", DType::F8_E8M0, {rows, ehd / 32});
  L.engram_table = codes.data;
  L.engram_table_scale = scales.data;
  L.engram_stride = codes.stride();
  L.engram_scale_stride = scales.stride();
  // ds4's rows: the scales right after the codes, in the same bytes
  L.engram_native = codes.row_stride != 0;
  if (L.engram_native && (L.engram_stride != size_t(ehd + ehd / 32) ||
                          scales.row_stride != codes.row_stride || scales.data != codes.data + ehd))
    throw std::runtime_error("tensor " + p + "engram.embed: strided rows that are not ds4's");
}

// One block's tensors under prefix p ("layers.7." or "mtp.0."): P says which optional parts it
// has (a DSpark stage: none), E its routed experts.
LayerWeights bind_block(ModelWeights& W, const Checkpoint& ck, const LayerPlan& P,
                        const std::string& p, int E) {
  const ModelConfig& c = ck.config();
  const int D = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, hc = c.hc_mult;
  const int mix = (2 + hc) * hc;
  LayerWeights L;
  L.attn_norm = bf16_vec(W, ck, p + "attn_norm.weight", {D});
  L.ffn_norm = bf16_vec(W, ck, p + "ffn_norm.weight", {D});
  L.hc_attn_fn = f32_vec(W, ck, p + "hc_attn_fn", {mix, int64_t(hc) * D});
  L.hc_attn_base = f32_vec(W, ck, p + "hc_attn_base", {mix});
  L.hc_attn_scale = f32_vec(W, ck, p + "hc_attn_scale", {3});
  L.hc_ffn_fn = f32_vec(W, ck, p + "hc_ffn_fn", {mix, int64_t(hc) * D});
  L.hc_ffn_base = f32_vec(W, ck, p + "hc_ffn_base", {mix});
  L.hc_ffn_scale = f32_vec(W, ck, p + "hc_ffn_scale", {3});
  // attention
  L.attn_sink = f32_vec(W, ck, p + "attn.attn_sink", {H});
  L.q_norm = bf16_vec(W, ck, p + "attn.q_norm.weight", {c.q_lora_rank});
  L.kv_norm = bf16_vec(W, ck, p + "attn.kv_norm.weight", {hd});
  L.wq_a = linear(W, ck, p + "attn.wq_a", c.q_lora_rank, D);
  L.wq_b = linear(W, ck, p + "attn.wq_b", H * hd, c.q_lora_rank);
  L.wkv = linear(W, ck, p + "attn.wkv", hd, D);
  const int og = c.o_groups;
  Linear wo_a = linear(W, ck, p + "attn.wo_a", og * c.o_lora_rank, H * hd / og);
  if (wo_a.kind == Linear::Kind::FP8 && c.o_lora_rank % 32 == 0) {
    wo_a.kind = Linear::Kind::FP8W;  // the bf16-weight product, read from the FP8 bytes
  } else if (wo_a.kind == Linear::Kind::FP8) {
    // an output group that splits a 32-row scale group: a bf16 copy, as convert.py makes
    const std::vector<uint16_t> v = dequant_fp8_to_bf16(wo_a);
    wo_a.w = W.own_copy(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 2);
    wo_a.scale = nullptr;
    wo_a.kind = Linear::Kind::BF16;
  } else if (wo_a.kind != Linear::Kind::BF16) {
    throw std::runtime_error("tensor " + p + "attn.wo_a.weight: expected FP8 or BF16");
  }
  L.wo_a = wo_a;
  L.wo_b = linear(W, ck, p + "attn.wo_b", D, og * c.o_lora_rank);
  if (P.is_kv_source) {
    const auto want = Linear::Kind::BF16;  // promoted to fp32 at ratio > 1 (exact products)
    L.comp_wkv = linear_of(W, ck, p + "attn.compressor.wkv", hd, D, want);
    if (P.ratio > 1) L.comp_wgate = linear_of(W, ck, p + "attn.compressor.wgate", hd, D, want);
    L.comp_norm = bf16_vec(W, ck, p + "attn.compressor.norm.weight", {hd});
    L.idx_wk = linear_of(W, ck, p + "attn.indexer.wk", c.index_head_dim, hd, Linear::Kind::BF16);
    L.idx_k_norm = bf16_vec(W, ck, p + "attn.indexer.k_norm.weight", {c.index_head_dim});
  }
  if (P.is_index_source) {
    L.idx_wq_b =
        linear(W, ck, p + "attn.indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank);
    L.idx_weights_proj =
        linear_of(W, ck, p + "attn.indexer.weights_proj", c.index_n_heads, D, Linear::Kind::BF16);
  }
  // MoE
  const int I = c.moe_intermediate_size;
  L.gate = linear_of(W, ck, p + "ffn.gate", E, D, Linear::Kind::BF16);
  L.gate_bias = f32_vec(W, ck, p + "ffn.gate.bias", {E});
  if (c.has_vision) L.gate_bias_vl = f32_vec(W, ck, p + "ffn.gate.bias_vl", {E});
  L.experts.resize(size_t(E));
  for (int e = 0; e < E; ++e) {
    const std::string ep = p + "ffn.experts." + std::to_string(e) + ".";
    L.experts[size_t(e)].w1 = linear(W, ck, ep + "w1", I, D);
    L.experts[size_t(e)].w2 = linear(W, ck, ep + "w2", D, I);
    L.experts[size_t(e)].w3 = linear(W, ck, ep + "w3", I, D);
  }
  L.shared.w1 = linear(W, ck, p + "ffn.shared_experts.w1", I, D);
  L.shared.w2 = linear(W, ck, p + "ffn.shared_experts.w2", D, I);
  L.shared.w3 = linear(W, ck, p + "ffn.shared_experts.w3", I, D);
  // an expert's gate and up projections read one prepared copy of its input (MoE::expert)
  for (int e = -1; e < E; ++e) {
    const ExpertWeights& ew = e < 0 ? L.shared : L.experts[size_t(e)];
    if (ew.w1.kind != ew.w3.kind)
      throw std::runtime_error("tensor " + ew.w3.name + ": stored in another format than " +
                               ew.w1.name);
  }
  // Engram
  if (P.has_engram) {
    const int ehd = c.engram_head_dim;
    const int n_cols = (c.engram_max_ngram_size - 1) * c.engram_n_heads;
    const int64_t rows = c.engram_num_embeddings.at(size_t(P.engram_index));
    L.engram_rows = rows;
    if (const Checkpoint::BlockWeight* b = ck.block_weight(p + "engram.embed.weight")) {
      if (b->out != rows || b->in != ehd)
        throw std::runtime_error("tensor " + p + "engram.embed.weight: " + std::to_string(b->out) +
                                 " x " + std::to_string(b->in) + " blocks, expected " +
                                 std::to_string(rows) + " x " + std::to_string(ehd));
      L.engram_type = b->ggml_type;
      L.engram_table = b->data;
      L.engram_stride = b->nbytes / size_t(rows);
    } else {
      bind_engram_table(ck, p, rows, ehd, L);
    }
    L.engram_wkv = linear(W, ck, p + "engram.wkv", D * (hc + 1), n_cols * ehd);
    L.engram_q_weight = bf16_vec(W, ck, p + "engram.q_weight", {hc, D});
    L.engram_k_weight = bf16_vec(W, ck, p + "engram.k_weight", {hc, D});
  }
  return L;
}

// The DSpark stages (spec v41-extras §2.2): blocks without compressor, indexer or Engram and
// with their own expert count; stage 0's context projection, the last stage's norm and heads.
// ref: model.py DSparkBlock.__init__
DSparkWeights bind_dspark(ModelWeights& W, const Checkpoint& ck) {
  const ModelConfig& c = ck.config();
  const int S = c.num_nextn_predict_layers, L = c.num_hidden_layers, D = c.hidden_size;
  const int r = c.dspark_markov_rank;
  const int64_t V = c.vocab_size;
  DSparkWeights d;
  for (int s = 0; s < S; ++s) {
    LayerPlan P;
    P.layer = L + s;
    d.stages.push_back(bind_block(W, ck, P, "mtp." + std::to_string(s) + ".", c.experts_of(L + s)));
  }
  const int n_taps = int(c.dspark_target_layer_ids.size());
  d.main_proj = linear(W, ck, "mtp.0.main_proj", D, n_taps * D);
  d.main_norm = bf16_vec(W, ck, "mtp.0.main_norm.weight", {D});
  const std::string last = "mtp." + std::to_string(S - 1) + ".";
  d.norm = bf16_vec(W, ck, last + "norm.weight", {D});
  d.markov_embed = bf16_vec(W, ck, last + "markov_head.embed.weight", {V, r});
  d.markov_head = linear_of(W, ck, last + "markov_head.head", int(V), r, Linear::Kind::BF16);
  d.confidence = linear_of(W, ck, last + "confidence_head.proj", 1, D + r, Linear::Kind::BF16);
  return d;
}

// ref: vision.py ViT.__init__, Aligner.__init__; model.py (image_start/end/newline)
VisionWeights bind_vision(ModelWeights& W, const Checkpoint& ck) {
  const ModelConfig& c = ck.config();
  const VisionConfig& vc = c.vision;
  const int V = vc.hidden_size, I = vc.intermediate_size, D = c.hidden_size;
  const int r2 = vc.downsample_ratio * vc.downsample_ratio;
  const auto bf16 = Linear::Kind::BF16;
  VisionWeights v;
  v.patch_embed = linear_of(W, ck, "vision.patch_embed.proj", V, vc.patch_dim(), bf16);
  v.patch_embed_bias = bf16_vec(W, ck, "vision.patch_embed.proj.bias", {V});
  for (int b = 0; b < vc.num_hidden_layers; ++b) {
    const std::string p = "vision.blocks." + std::to_string(b) + ".";
    VisionBlockWeights B;
    B.norm1 = bf16_vec(W, ck, p + "norm1.weight", {V});
    B.norm2 = bf16_vec(W, ck, p + "norm2.weight", {V});
    B.wqkv = linear_of(W, ck, p + "attn.wqkv", 3 * V, V, bf16);
    B.wqkv_bias = bf16_vec(W, ck, p + "attn.wqkv.bias", {3 * V});
    B.wo = linear_of(W, ck, p + "attn.wo", V, V, bf16);
    B.wo_bias = bf16_vec(W, ck, p + "attn.wo.bias", {V});
    B.w1 = linear_of(W, ck, p + "mlp.w1", 2 * I, V, bf16);
    B.w2 = linear_of(W, ck, p + "mlp.w2", V, I, bf16);
    v.blocks.push_back(B);
  }
  v.norm = bf16_vec(W, ck, "vision.norm.weight", {V});
  v.aligner_w1 = linear_of(W, ck, "aligner.w1", D, V * r2, bf16);
  v.aligner_b1 = bf16_vec(W, ck, "aligner.w1.bias", {D});
  v.aligner_w2 = linear_of(W, ck, "aligner.w2", D, D, bf16);
  v.aligner_b2 = bf16_vec(W, ck, "aligner.w2.bias", {D});
  v.image_start = bf16_vec(W, ck, "image_start", {D});
  v.image_end = bf16_vec(W, ck, "image_end", {D});
  v.image_newline = bf16_vec(W, ck, "image_newline", {D});
  return v;
}

}  // namespace

ModelWeights ModelWeights::bind(const Checkpoint& ck) {
  const ModelConfig& c = ck.config();
  const int64_t V = c.vocab_size;
  const int D = c.hidden_size;
  ModelWeights W;
  W.embed = bf16_vec(W, ck, "embed.weight", {V, D});
  W.head = bf16_vec(W, ck, "head.weight", {V, D});
  W.norm = bf16_vec(W, ck, "norm.weight", {D});
  W.lm_head.kind = Linear::Kind::BF16;
  W.lm_head.out = int(V);
  W.lm_head.in = D;
  W.lm_head.w = reinterpret_cast<const uint8_t*>(W.head);
  W.lm_head.name = "head";
  for (int l = 0; l < c.num_hidden_layers; ++l)
    W.layers.push_back(
        bind_block(W, ck, c.plan(l), "layers." + std::to_string(l) + ".", c.n_routed_experts));
  if (c.num_nextn_predict_layers > 0) W.dspark = bind_dspark(W, ck);
  if (c.has_vision) W.vision = bind_vision(W, ck);
  return W;
}

}  // namespace cedar
