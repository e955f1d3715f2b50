// The compact form of a trained model kept in the repository (models/default/): config.json plus
// compact.safetensors, or the same bytes gzipped as compact.safetensors.gz (how the repository
// keeps the default model: 21 MB instead of 26). The file holds every checkpoint tensor except
// embed.weight and head.weight as the release stores it, and instead of those two 129,280-row
// tables:
//   compact.used_ids    I32  [n]        the ids the model was trained on, strictly increasing
//   compact.embed_rows  BF16 [n+1, D]   their embedding rows, then the row of every other id
//   compact.head_rows   BF16 [n+1, D]   their head rows, then u, the row of every other id
// and, for a model with a trained DSpark drafter, its Markov tables the same way (optional: a
// file may hold them in full instead):
//   compact.markov_embed_rows / compact.markov_head_rows  BF16 [n+1, r]
//                                        -> mtp.{last}.markov_head.embed.weight / .head.weight
// The trainer's softmax is over the n rows plus one "other" class of logit h.u + log(V - n)
// (tools/train/), so a head whose unused rows are all u gives exactly the trained distribution.
// expand_compact_model writes the unchanged release layout from it.
#pragma once

#include <string>

namespace cedar {

// Writes out_dir/{config.json, model.safetensors, tokenizer.json[, tokenizer_config.json]}
// (through a temporary directory renamed at the end, so a reader never sees half a model), then
// opens the result as a Checkpoint (the full inventory check). Throws std::runtime_error naming
// the file or tensor on bad input.
void expand_compact_model(const std::string& compact_dir, const std::string& tokenizer_json,
                          const std::string& out_dir);

}  // namespace cedar
