// Reference decoders of the ggml tensor types a V4.1 GGUF holds (../shared/spec/v41-gguf.md §7):
// one row of n elements (n a multiple of the type's block) from its stored bytes to fp32, exactly
// as the format defines each value. Every value of these formats is a product of a few small
// integers and one or two fp16/E8M0 scales, exact in fp32 (Q6_K's d·sc·q is the one product that
// can need a rounding: once, to nearest even), so the decoders have no ordering freedom: any
// correct implementation gives the same floats (docs/NUMERICS.md "GGUF types"). These are the
// oracle of the fast kernels and of `cedar inspect --tensor`.
#pragma once

#include <cstdint>
#include <vector>

#include "model/gguf.h"

namespace cedar::gguf {

// Whether decode_row handles the type id.
bool decodable(uint32_t type);
// src: the row's bytes (n / block_elems blocks); dst: n floats. Throws std::invalid_argument for a
// type decodable() refuses or a ragged n.
void decode_row(uint32_t type, const uint8_t* src, int64_t n, float* dst);

// ds4's native Engram rows (`e4m3_e8m0_32_row264`, spec §4.3; an I8 tensor [cols + cols/32,
// rows]): `cols` E4M3 codes, then one UE8M0 scale per 32 columns; value = e4m3 x 2^(scale - 127).
// Whether a row is free of NaN (codes 0x7F/0xFF, scale 255), which ds4 refuses and so does cedar;
// one row decoded to fp32 (exact).
bool engram_row_valid(const uint8_t* row, int64_t cols);
void decode_engram_row(const uint8_t* row, int64_t cols, float* dst);

// Bytes of one row (ne[0] elements) of a tensor; of n elements of a type (whole blocks).
uint64_t row_bytes(const TensorInfo& t);
uint64_t row_bytes(uint32_t type, int64_t n);
// Rows [r0, r0 + n) of a tensor (expert >= 0: of that expert's slice of a merged 3-D tensor),
// each ne[0] floats, decoded into dst. Throws as decode_tensor does, and for rows it has not.
void decode_rows(const Header& h, const uint8_t* file, const TensorInfo& t, int expert, int64_t r0,
                 int64_t n, float* dst);
// One tensor of a parsed file (`file`: the bytes parse_header read) decoded to fp32 in the release
// shape (ggml's ne reversed); expert >= 0 picks that expert's [out, in] slice of a merged 3-D
// tensor. Throws naming the tensor for a type decodable() refuses or a missing expert.
std::vector<float> decode_tensor(const Header& h, const uint8_t* file, const TensorInfo& t,
                                 int expert, std::vector<int64_t>* shape);

}  // namespace cedar::gguf
