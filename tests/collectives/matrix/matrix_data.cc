// Deterministic inputs, exact references and the float error bounds (matrix_data.h).
#include "matrix/matrix_data.h"

#include "reduce/half.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace zcx::coll::matrix {
namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t raw_bits(uint32_t salt, int rank, size_t i) {
  return mix64((static_cast<uint64_t>(salt) << 36) ^ (static_cast<uint64_t>(rank) << 28) ^
               (static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull));
}

// Float formats: storage type, bits of precision, conversions through float/double.
struct F16 {
  using S = uint16_t;
  static constexpr int kPrecision = 11;
  static constexpr long double kTiny = 5.9604644775390625e-8L;  // 2^-24
  static double load(S v) { return f16_to_f32(v); }
  static S store(double d) { return f32_to_f16(static_cast<float>(d)); }
};
struct BF16 {
  using S = uint16_t;
  static constexpr int kPrecision = 8;
  static constexpr long double kTiny = 9.183549615799121e-41L;  // 2^-133
  static double load(S v) { return bf16_to_f32(v); }
  static S store(double d) { return f32_to_bf16(static_cast<float>(d)); }
};
struct F32 {
  using S = float;
  static constexpr int kPrecision = 24;
  static constexpr long double kTiny = 1.401298464324817e-45L;
  static double load(S v) { return v; }
  static S store(double d) { return static_cast<float>(d); }
};
struct F64 {
  using S = double;
  static constexpr int kPrecision = 53;
  static constexpr long double kTiny = 4.9406564584124654e-324L;
  static long double load(S v) { return v; }
  static S store(double d) { return d; }
};
template <class T>
struct Int {
  using S = T;
};

template <class T>
struct IsInt : std::false_type {};
template <class T>
struct IsInt<Int<T>> : std::true_type {};

template <class D>
typename D::S input(zcx_redop_t op, uint32_t salt, int rank, size_t i) {
  const uint64_t h = raw_bits(salt, rank, i);
  if constexpr (IsInt<D>::value) {
    using S = typename D::S;
    return op == ZCX_PROD ? static_cast<S>(h | 1) : static_cast<S>(h);
  } else {
    const double unit = static_cast<double>(h >> 11) * 0x1p-53;  // [0, 1)
    return D::store(op == ZCX_PROD ? 0.75 + unit * 0.5 : unit * 4.0 - 2.0);
  }
}

template <class T>
T load_at(const void* p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

template <class S>
S int_expected(zcx_redop_t op, uint32_t salt, int nranks, size_t i) {
  using U = std::make_unsigned_t<S>;
  const zcx_redop_t in_op = op;
  U acc = op == ZCX_PROD ? U{1} : U{0};
  S best = input<Int<S>>(in_op, salt, 0, i);
  for (int r = 0; r < nranks; ++r) {
    S x = input<Int<S>>(in_op, salt, r, i);
    if (op == ZCX_PROD) acc = static_cast<U>(acc * static_cast<U>(x));
    else acc = static_cast<U>(acc + static_cast<U>(x));
    if (op == ZCX_MIN && x < best) best = x;
    if (op == ZCX_MAX && x > best) best = x;
  }
  if (op == ZCX_MIN || op == ZCX_MAX) return best;
  S total = static_cast<S>(acc);
  return op == ZCX_AVG ? static_cast<S>(total / static_cast<S>(nranks)) : total;
}

// The exact result and the allowed distance from it, in a type wide enough to be exact for
// the few values of one element: double below float64, long double for float64.
template <class D>
using Wide = decltype(D::load(typename D::S{}));

template <class D>
struct FloatRef {
  Wide<D> value = 0, slack = 0;
};

// The parts of the bound that depend only on the case, computed once per check.
template <class D>
struct FloatBound {
  using W = Wide<D>;
  W u, gamma, tiny, k_tiny, prod_scale;
  FloatBound(int nranks, int k) {
    // A 16-bit reduction rounds twice (float32, then the dtype): allow for it in u.
    u = std::ldexp(W{1}, -D::kPrecision) * (D::kPrecision < 24 ? 1 + 0x1p-12 : 1);
    gamma = k * u / (1 - k * u);  // bound on the relative growth of k roundings
    tiny = static_cast<W>(D::kTiny);
    k_tiny = k * tiny;  // k smallest subnormals: the roundings of a sum near zero
    // Every one of the nranks - 1 products scales the whole result.
    prod_scale = (std::pow(1 + u, static_cast<W>(nranks - 1)) - 1) * (1 + 0x1p-20);
  }
};

template <class D>
FloatRef<D> float_expected(const FloatBound<D>& b, zcx_redop_t op, uint32_t salt, int nranks,
                           size_t i) {
  using W = Wide<D>;
  W sum = 0, abs_sum = 0, prod = 1, best = D::load(input<D>(op, salt, 0, i));
  for (int r = 0; r < nranks; ++r) {
    W x = D::load(input<D>(op, salt, r, i));
    sum += x, abs_sum += std::fabs(x), prod *= x;
    if (op == ZCX_MIN && x < best) best = x;
    if (op == ZCX_MAX && x > best) best = x;
  }
  const W sum_slack = b.gamma * abs_sum + b.k_tiny;
  switch (op) {
    case ZCX_SUM: return {sum, sum_slack};
    case ZCX_PROD: return {prod, b.prod_scale * std::fabs(prod)};
    case ZCX_AVG: {
      W avg = sum / nranks;
      return {avg, sum_slack / nranks + b.u * std::fabs(avg) + b.tiny};
    }
    default: return {best, 0};
  }
}

template <class T>
std::string describe(size_t first, size_t i, T got, T want, size_t bad, size_t count) {
  char buf[200];
  snprintf(buf, sizeof buf, "element %zu (index %zu): got %.17Lg want %.17Lg; %zu of %zu wrong",
           i, first + i, static_cast<long double>(got), static_cast<long double>(want), bad, count);
  return buf;
}

template <class D>
std::string check_reduced_as(zcx_redop_t op, uint32_t salt, int nranks, int k, size_t first,
                             size_t count, const void* got) {
  using S = typename D::S;
  size_t bad = 0, first_bad = 0;
  long double bad_got = 0, bad_want = 0;
  [[maybe_unused]] const auto bound = [&] {
    if constexpr (IsInt<D>::value) return 0;
    else return FloatBound<D>(nranks, k);
  }();
  for (size_t i = 0; i < count; ++i) {
    S g = load_at<S>(got, i);
    long double gv, want;
    bool ok;
    if constexpr (IsInt<D>::value) {
      S w = int_expected<S>(op, salt, nranks, first + i);
      ok = g == w, gv = static_cast<long double>(g), want = static_cast<long double>(w);
    } else {
      FloatRef<D> ref = float_expected<D>(bound, op, salt, nranks, first + i);
      gv = D::load(g), want = ref.value;
      ok = std::fabs(gv - want) <= ref.slack;
    }
    if (!ok && bad++ == 0) first_bad = i, bad_got = gv, bad_want = want;
  }
  return bad ? describe(first, first_bad, bad_got, bad_want, bad, count) : "";
}

template <class D>
std::string check_copied_as(zcx_redop_t op, uint32_t salt, int src, size_t first, size_t count,
                            const void* got) {
  using S = typename D::S;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < count; ++i) {
    S want = input<D>(op, salt, src, first + i), g = load_at<S>(got, i);
    if (std::memcmp(&want, &g, sizeof(S)) != 0 && bad++ == 0) first_bad = i;
  }
  if (!bad) return "";
  S want = input<D>(op, salt, src, first + first_bad), g = load_at<S>(got, first_bad);
  if constexpr (IsInt<D>::value) return describe(first, first_bad, g, want, bad, count);
  else return describe(first, first_bad, D::load(g), D::load(want), bad, count);
}

template <class D>
void fill_as(zcx_redop_t op, uint32_t salt, int rank, size_t first, size_t count, void* out) {
  auto* p = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < count; ++i) {
    typename D::S v = input<D>(op, salt, rank, first + i);
    std::memcpy(p + i * sizeof v, &v, sizeof v);
  }
}

// Calls fn with the descriptor type of dt (Int<T>, F16, BF16, F32 or F64).
template <class Fn>
auto dispatch(zcx_dtype_t dt, Fn&& fn) {
  switch (dt) {
    case ZCX_INT8: return fn(Int<int8_t>{});
    case ZCX_UINT8: return fn(Int<uint8_t>{});
    case ZCX_INT32: return fn(Int<int32_t>{});
    case ZCX_UINT32: return fn(Int<uint32_t>{});
    case ZCX_INT64: return fn(Int<int64_t>{});
    case ZCX_UINT64: return fn(Int<uint64_t>{});
    case ZCX_FLOAT16: return fn(F16{});
    case ZCX_BFLOAT16: return fn(BF16{});
    case ZCX_FLOAT32: return fn(F32{});
    default: return fn(F64{});
  }
}

}  // namespace

void fill_input(zcx_dtype_t dt, zcx_redop_t op, uint32_t salt, int rank, size_t first,
                size_t count, void* out) {
  dispatch(dt, [&](auto d) { fill_as<decltype(d)>(op, salt, rank, first, count, out); });
}

std::string check_reduced(zcx_dtype_t dt, zcx_redop_t op, uint32_t salt, int nranks, int k,
                          size_t first, size_t count, const void* got) {
  return dispatch(dt, [&](auto d) {
    return check_reduced_as<decltype(d)>(op, salt, nranks, k, first, count, got);
  });
}

std::string check_copied(zcx_dtype_t dt, zcx_redop_t op, uint32_t salt, int src, size_t first,
                         size_t count, const void* got) {
  return dispatch(dt, [&](auto d) {
    return check_copied_as<decltype(d)>(op, salt, src, first, count, got);
  });
}

}  // namespace zcx::coll::matrix
