#!/usr/bin/env bash
# cedar convert (bf16, lossless) writes a dialect-A GGUF that cedar inspect reads back: dialect A,
# the model's config, and every kind of tensor (FP8 weights, FP4 experts from the merged MXFP4
# tensors, the Engram table, BF16 and F32 tensors) decoded identically to the release values the
# numpy reference decodes; the file runs as a model (-m FILE.gguf) with the directory's logits bit
# for bit in reference and fast mode (one-shot, chunked, decode), its tokenizer from the file (the
# whole tokenizer.json or only llama.cpp's keys), the prefix cache keyed by the file; hostile GGUF
# files are refused with their names.
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
check "inspect: lossless load" grep -q "0 values not exactly representable" "$WORK/inspect.txt"
# the routed experts (merged MXFP4 tensors) are computed in place, not copied: 7 layers x 8
# experts x 3 projections, the file's only block weights
check "inspect: MXFP4 experts in place" grep -q " 168 weights computed in place as GGUF blocks" \
  "$WORK/inspect.txt"
# the GGUF file as the model: the same logits bit for bit (ref and the best table of this CPU)
make_ids 15 150 "$WORK/ids"
same_logits "$M" "$G" "$WORK/ids"
# the tokenizer from llama.cpp's keys only, and the runtime paths: run, the prefix cache
"$CEDAR_BIN" convert --from "$M" --to "$WORK/ggml_tok.gguf" --ggml-tokenizer-only >/dev/null
run() { "$CEDAR_BIN" run -m "$1" --raw -p "The 12 quick brown foxes, 日本語" --temp 0 -n 8 "${@:2}" 2>"$WORK/run.err"; }
run "$M" --speculative off >"$WORK/dir.txt"
run "$G" >"$WORK/gguf.txt"
check "run: same text" cmp -s "$WORK/dir.txt" "$WORK/gguf.txt"
run "$WORK/ggml_tok.gguf" >"$WORK/ggml.txt"
check "run: ggml tokenizer keys" cmp -s "$WORK/dir.txt" "$WORK/ggml.txt"
"$PY" -c "print(' '.join(f'word{i} and' for i in range(120)))" >"$WORK/long.txt"
cached() { "$CEDAR_BIN" run -m "$1" --raw -f "$WORK/long.txt" --temp 0 -n 6 --cache-dir "$WORK/pc" \
  --cache-interval 128 2>"$WORK/run.err"; }
cached "$G" >/dev/null
cached "$G" >/dev/null
check "prefix cache restores" grep -q "prefix cache hit (disk): 361 tokens" "$WORK/run.err"
cached "$WORK/ggml_tok.gguf" >/dev/null
check "prefix cache: another file is another model" grep -q "(0 cached)" "$WORK/run.err"
# the staging file's types (Q8_0 FP8 weights and Engram table): lossy, re-quantized at load, counted
"$CEDAR_BIN" convert --from "$M" --to "$WORK/q8.gguf" --type q8_0 >/dev/null
check "q8_0: types" grep -q "Q8_0" <("$CEDAR_BIN" inspect --model "$WORK/q8.gguf")
check "q8_0: counted" grep -Eq "re-encoded .* [1-9][0-9]* values not exactly representable" \
  <("$CEDAR_BIN" inspect --model "$WORK/q8.gguf")
check "q8_0: runs" "$CEDAR_BIN" logits -m "$WORK/q8.gguf" --ids-file "$WORK/ids" --out "$WORK/q.npy"
# the K-quant rungs: 256-wide rows (wo_a here) as the K-quant, the tiny preset's 128- and 64-wide
# rows as llama-quantize's fallbacks; loaded and run like any file
for rung in "q4_k Q4_K Q5_0" "q2_k Q2_K Q4_0"; do
  read -r q kq fallback <<<"$rung"
  "$CEDAR_BIN" convert --from "$M" --to "$WORK/$q.gguf" --type "$q" >/dev/null
  "$CEDAR_BIN" inspect --model "$WORK/$q.gguf" >"$WORK/$q.txt"
  check "$q: $kq" grep -Eq "^ +$kq " "$WORK/$q.txt"
  check "$q: $fallback" grep -Eq "^ +$fallback " "$WORK/$q.txt"
  check "$q: runs" "$CEDAR_BIN" run -m "$WORK/$q.gguf" --raw -p "The quick brown" --temp 0 -n 4
done
# Q8_0 and K-quant weights are computed in place (their kernel families), with the structural
# invariants of every model: one-shot = chunked = token by token, in reference and fast mode
for q in q8 q4_k q2_k; do
  check "$q: blocks in place" grep -Eq "load: .* [1-9][0-9]* weights computed in place as GGUF blocks" \
    <("$CEDAR_BIN" inspect --model "$WORK/$q.gguf")
  invariant_logits "$WORK/$q.gguf" "$WORK/ids" "$q"
done
# --gguf-requant on the lossless file: the MXFP4 experts shuffled into the release's pairs at
# load instead (the old path), the same logits
"$CEDAR_BIN" logits -m "$G" --ids-file "$WORK/ids" --out "$WORK/g.npy" --kernels ref --gguf-requant 2>/dev/null
"$CEDAR_BIN" logits -m "$M" --ids-file "$WORK/ids" --out "$WORK/d.npy" --kernels ref 2>/dev/null
check "requant: lossless file, same logits" cmp -s "$WORK/d.npy" "$WORK/g.npy"
# --gguf-requant: the same file re-encoded into FP8/FP4 at load, a different (doubly rounded) model
"$CEDAR_BIN" logits -m "$WORK/q4_k.gguf" --ids-file "$WORK/ids" --out "$WORK/o.npy" --kernels ref 2>/dev/null
"$CEDAR_BIN" logits -m "$WORK/q4_k.gguf" --ids-file "$WORK/ids" --out "$WORK/r.npy" --kernels ref --gguf-requant 2>/dev/null
"$CEDAR_BIN" logits -m "$WORK/q4_k.gguf" --ids-file "$WORK/ids" --out "$WORK/c.npy" --kernels ref --gguf-requant --decode 2>/dev/null
check "requant: another model" bash -c "! cmp -s '$WORK/o.npy' '$WORK/r.npy'"
check "requant: decode = one-shot" cmp -s "$WORK/r.npy" "$WORK/c.npy"
# a split model (gguf-split's layout): the same logits from any shard's name; a missing shard and a
# shard under a plain name are refused
"$CEDAR_BIN" convert --from "$M" --to "$WORK/split.gguf" --split-max-tensors 60 >"$WORK/split.txt"
check "split: 4 shards" grep -q "split-00004-of-00004.gguf" "$WORK/split.txt"
"$CEDAR_BIN" logits -m "$M" --ids-file "$WORK/ids" --out "$WORK/a.npy" --kernels ref 2>/dev/null
"$CEDAR_BIN" logits -m "$WORK/split-00002-of-00004.gguf" --ids-file "$WORK/ids" --out "$WORK/b.npy" \
  --kernels ref 2>/dev/null
check "split: logits" cmp -s "$WORK/a.npy" "$WORK/b.npy"
check "split: inspect" grep -q "201 tensors, alignment 32, 4 shards" \
  <("$CEDAR_BIN" inspect --model "$WORK/split-00001-of-00004.gguf")
cp "$WORK/split-00001-of-00004.gguf" "$WORK/lone.gguf"
check "split: a lone shard" refuses "one shard of a split model" "$CEDAR_BIN" inspect --model "$WORK/lone.gguf"
rm "$WORK/split-00003-of-00004.gguf"
check "split: missing shard" refuses "split-00003-of-00004.gguf: missing" \
  "$CEDAR_BIN" run -m "$WORK/split-00001-of-00004.gguf" -p hi -n 1
# hostile files: a truncated header, truncated tensor data
head -c 100000 "$G" >"$WORK/cut.gguf"
check "truncated header" refuses "truncated: value of 'tokenizer.ggml.tokens'" \
  "$CEDAR_BIN" inspect --model "$WORK/cut.gguf"
check "truncated header: run" refuses "truncated: value of 'tokenizer.ggml.tokens'" \
  "$CEDAR_BIN" run -m "$WORK/cut.gguf" -p hi -n 1
head -c $(($(stat -c %s "$G") - 4096)) "$G" >"$WORK/cut2.gguf"
check "truncated data" refuses "run past the end of the file" "$CEDAR_BIN" inspect --model "$WORK/cut2.gguf"
check "truncated data: logits" refuses "run past the end of the file" \
  "$CEDAR_BIN" logits -m "$WORK/cut2.gguf" --ids 1,2 --out "$WORK/x.npy"
check "no tensor" refuses "no tensor 'blk.0.nothing.weight'" \
  "$CEDAR_BIN" inspect --model "$G" --tensor blk.0.nothing.weight --out "$WORK/x.npy"
finish
