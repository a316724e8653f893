// The collective matrix's data: every rank's input is a pure function of (case salt, rank,
// element index), so every process can compute every other rank's input and check any
// result locally, and a stale buffer from an earlier case never passes.
//
// Inputs. Integers: full-range values (odd ones for prod, so a wrapped product never
// collapses to 0). Floats: uniform in [-2, 2) (prod: [0.75, 1.25)), rounded to the dtype.
//
// Expected results. Integers are exact: sum and prod wrap (the library computes them on the
// unsigned type), min/max compare in the dtype, avg is the wrapped sum divided by nranks in
// the dtype (truncating). min and max are exact for floats too (value comparison, so -0 and
// +0 are equal). Float sum/prod/avg are compared with the exact result (long double) under
// the bound below, where u is the dtype's unit roundoff (float16 2^-11, bfloat16 2^-8,
// float32 2^-24, float64 2^-53; a 16-bit reduction is a float32 operation rounded to the
// dtype, so u is raised by 2^-12 there for the double rounding) and k is the largest number
// of rounded binary operations any rank's value goes through before it reaches the result
// (gamma_k = k u / (1 - k u), the classic bound for k roundings):
//   sum   |got - exact| <= gamma_k * sum_r |x_r|  (+ k smallest subnormals)
//   avg   the sum bound / nranks, plus one rounding of the division: + u * |exact|
//   prod  |got - exact| <= ((1 + u)^(p - 1) - 1) * |exact|  (p = nranks: each of the p - 1
//         multiplications scales the whole product, whatever the order, so no algorithm
//         does better than p - 1 here)
// k per algorithm (p = nranks, lg = ceil(log2)), each capped at p - 1 (any order of
// reduction of p values has at most p - 1 operations on one value's path):
//   ring allreduce, ring reducescatter(v), chain reduce      p - 1
//   tree allreduce (in-order double binary tree, 2 adds per inner node, 1 at the root)
//                                                            2 floor(log2(p - 1)) + 1
//   rhd allreduce (fold of the p - p' extra ranks, then lg p' halving steps)
//                                                            log2 p' + (p > p'), p' = 2^floor(log2 p)
//   binomial reduce (children added one after another at every ancestor)
//                                                            lg p (lg p + 1) / 2
//   hier allreduce (binomial inside a host, ring across the g hosts)
//                                                            lg q (lg q + 1) / 2 + g - 1, q = most ranks on a host
// A copy (broadcast, the gathers, alltoall(v), send/recv) must be bit-exact.
#pragma once

#include <zcx/coll.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace zcx::coll::matrix {

// Writes elements [first, first + count) of rank `rank`'s input for a case into out.
void fill_input(zcx_dtype_t dt, zcx_redop_t op, uint32_t salt, int rank, size_t first,
                size_t count, void* out);

// Checks got[0..count) against the reduction over ranks 0..nranks-1 of input elements
// [first, first + count), with at most `k` rounded operations on a value's path (floats).
// Returns "" when right, else the first bad element and the number of bad ones.
std::string check_reduced(zcx_dtype_t dt, zcx_redop_t op, uint32_t salt, int nranks, int k,
                          size_t first, size_t count, const void* got);

// Checks that got[0..count) is bit-identical to rank src's input elements [first, ...).
std::string check_copied(zcx_dtype_t dt, zcx_redop_t op, uint32_t salt, int src, size_t first,
                         size_t count, const void* got);

}  // namespace zcx::coll::matrix
