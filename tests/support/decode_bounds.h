// The error bound of a decode over a rounded KV cache (docs/CONFIG.md), for
// tests/backends/decode_test.cpp. Here, not in the suite, because support/
// builds at the build's optimisation level while the suites build at -O0
// (tests/CMakeLists.txt): the bound's loops over every (query, key) pair took
// three quarters of Decode.GqaMqaWindowsRopeAndEdges' time at -O0.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "backends/backend.h"
#include "model/cache_dtype.h"
#include "tensor/tensor.h"

namespace mha::test {

// Per output element, the bound docs/CONFIG.md derives for a decode whose
// cache holds K and V rounded (each element off by at most u of its block's
// largest magnitude) and whose scores read the query rounded with u_q, from
// the exact run's q, k, v, weights and context (the reference's stages).
// Per head and query row i: key j's score moves by at most
//   D_j = scale * sum over blocks b of (u |q_b|_1 max|k_jb| + u_q (1 + u) max|q_b| |k_jb|_1)
// (softcap only shrinks a change); with z = ln sum_j p_j e^(D_j), each weight
// moves within p_j (e^(D_j + z) - 1) (mass a sink takes, within p_sink (e^z - 1)),
// so context element e is off by at most
//   sum_j p_j (e^(D_j + z) u max|v_jb(e)| + (e^(D_j + z) - 1) |v_je - c_ie|)  (+ p_sink (e^z - 1) |c_ie|)
// (the weights' change sums to 0, so it moves c by sum_j dp_j (v_je - c_ie)),
// and the output element r by the row sum of |W_o[r, :]| times those.
// One bound per query unit in uq (the arithmetic over |v - c| is shared).
std::vector<std::vector<double>> rounding_bounds(const AttentionSpec& s, const AttentionResult& r, CacheDtype dt,
                                                 const std::vector<double>& uq);

// |a - b| <= bound plus torch.testing's float32 tolerances (atol 1e-5, rtol
// 1.3e-6 of b: the cpu's float32 arithmetic), element by element.
::testing::AssertionResult within_bound(const Tensor& a, const Tensor& b, const std::vector<double>& bound);

}  // namespace mha::test
