#!/usr/bin/env bash
# cedar convert (bf16, lossless) writes a dialect-A GGUF that cedar inspect reads back: dialect A,
# the model's config, and every kind of tensor (FP8 weights, FP4 experts from the merged MXFP4
# tensors, the Engram table, BF16 and F32 tensors) decoded identically to the release values the
# numpy reference decodes; hostile GGUF files are refused with their names.
source "$(dirname "$0")/lib.sh"
M="$WORK/tiny"
G="$WORK/tiny.gguf"
"$CEDAR_BIN" make-model --preset tiny --seed 3 --out "$M" >/dev/null
"$CEDAR_BIN" convert --from "$M" --to "$G" >/dev/null
"$CEDAR_BIN" inspect --model "$G" >"$WORK/inspect.txt"
check "dialect A" grep -q "dialect: A (llama.cpp converter)" "$WORK/inspect.txt"
check "config" grep -q "model: 7 layers, hidden 128" "$WORK/inspect.txt"
for t in layers.0.attn.wq_a.weight layers.3.attn.wo_a.weight layers.2.ffn.shared_experts.w2.weight \
         layers.1.ffn.experts.0.w1.weight layers.1.ffn.experts.7.w2.weight layers.5.ffn.experts.3.w3.weight \
         layers.1.engram.embed.weight layers.2.engram.wkv.weight layers.2.attn.compressor.wkv.weight \
         layers.0.hc_attn_fn layers.4.attn.attn_sink embed.weight head.weight; do
  "$CEDAR_BIN" inspect --model "$G" --tensor "$t" --out "$WORK/t.npy" >/dev/null
  check "$t" "$PY" "$CEDAR_SOURCE_DIR/tests/model/compare_gguf_tensor.py" "$M" "$t" "$WORK/t.npy"
done
# hostile files: a truncated header, truncated tensor data
head -c 100000 "$G" >"$WORK/cut.gguf"
check "truncated header" refuses "truncated: value of 'tokenizer.ggml.tokens'" \
  "$CEDAR_BIN" inspect --model "$WORK/cut.gguf"
head -c $(($(stat -c %s "$G") - 4096)) "$G" >"$WORK/cut2.gguf"
check "truncated data" refuses "run past the end of the file" "$CEDAR_BIN" inspect --model "$WORK/cut2.gguf"
check "no tensor" refuses "no tensor 'blk.0.nothing.weight'" \
  "$CEDAR_BIN" inspect --model "$G" --tensor blk.0.nothing.weight --out "$WORK/x.npy"
finish
