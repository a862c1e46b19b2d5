#pragma once
// The reference backend's multi-head latent attention (AttentionSpec::mla):
// the expanded q, k, v of a run, and the absorbed form's decode session.
#include <memory>
#include <vector>

#include "backends/decode.h"
#include "model/rope.h"

namespace mha::reference {

using Vec = std::vector<double>;

// y[n, out] = x[n, in] @ w^T + b in float64 (reference_backend.cpp).
Vec project(const Vec& x, int64_t n, const Projection& p);

// Softmax of row w [n] in place (head h's sink joining the denominator when
// the spec has sinks), as every reference path computes it.
void softmax_row(const AttentionSpec& spec, const Vec& sinks, int64_t h, double* w, int64_t n);

// The expanded form's q [rows, H*dh] (rotated), k [rows, H*dh] and v
// [rows, H*dv] of query rows xq and key rows xk (the same positions: MLA is
// self-attention), rotated by table t.
void mla_qkv(const AttentionSpec& spec, const RopeTable& t, const Vec& xq, const Vec& xk, int64_t rows, Vec& q, Vec& k,
             Vec& v);

// The absorbed form over a latent cache of [c | kr] per token.
std::unique_ptr<DecodeSession> make_mla_decode(const AttentionSpec& spec, const DecodeOptions& opt);

}  // namespace mha::reference
