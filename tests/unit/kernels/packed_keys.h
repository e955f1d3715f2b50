// Test helper: a sparse-attention key list built from values, stored the way the state stores it
// (window rows as FP8 E4M3 + UE8M0 / 32, compressed rows as E2M1 + E4M3 / 16), and the exact
// values those packed rows decode to.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/ref/ref.h"

namespace cedar::test {

struct PackedKeys {
  int hd = 0, n_win = 0, n_comp = 0;
  std::vector<uint8_t> wcodes, wscales, ccodes, cscales;
  std::vector<KeyRow> win, comp;
  std::vector<float> values;  // [n_win + n_comp, hd] the decoded rows, in list order

  AttnKeys keys() const {
    AttnKeys k;
    k.win = win.data();
    k.n_win = n_win;
    k.comp = comp.data();
    k.n_comp = n_comp;
    return k;
  }
};

// rows [n_win + n_comp, hd] of bf16 values (hd % 32 == 0): the first n_win as window rows.
inline PackedKeys pack_keys(const std::vector<float>& rows, int hd, int n_win, int n_comp) {
  PackedKeys p;
  p.hd = hd;
  p.n_win = n_win;
  p.n_comp = n_comp;
  p.wcodes.resize(size_t(n_win) * hd);
  p.wscales.resize(size_t(n_win) * (hd / 32));
  p.ccodes.resize(size_t(n_comp) * (hd / 2));
  p.cscales.resize(size_t(n_comp) * (hd / 16));
  p.values.resize(size_t(n_win + n_comp) * hd);
  for (int j = 0; j < n_win; ++j) {
    uint8_t* c = p.wcodes.data() + size_t(j) * hd;
    uint8_t* s = p.wscales.data() + size_t(j) * (hd / 32);
    kernels::ref::act_quant(rows.data() + size_t(j) * hd, hd, c, s);
    kernels::ref::dequant_fp8(c, s, hd, p.values.data() + size_t(j) * hd);
  }
  for (int j = 0; j < n_comp; ++j) {
    uint8_t* c = p.ccodes.data() + size_t(j) * (hd / 2);
    uint8_t* s = p.cscales.data() + size_t(j) * (hd / 16);
    kernels::ref::fp4_act_quant_e4m3(rows.data() + size_t(n_win + j) * hd, hd, c, s);
    kernels::ref::dequant_fp4_e4m3(c, s, hd, p.values.data() + size_t(n_win + j) * hd);
  }
  for (int j = 0; j < n_win; ++j)
    p.win.push_back({p.wcodes.data() + size_t(j) * hd, p.wscales.data() + size_t(j) * (hd / 32)});
  for (int j = 0; j < n_comp; ++j)
    p.comp.push_back(
        {p.ccodes.data() + size_t(j) * (hd / 2), p.cscales.data() + size_t(j) * (hd / 16)});
  return p;
}

}  // namespace cedar::test
