// Names on the command line: collectives, dtypes and reduction ops as nccl-tests spells
// them (zcx-perf coll and zcx-plan take the same ones).
#include "coll/names.h"

#include <string>

namespace zcx::perf {
namespace {

struct NamedDtype {
  const char* name;
  zcx_dtype_t dtype;
};
// nccl-tests' names first (they are what the table prints), then the aliases it accepts.
constexpr NamedDtype kDtypes[] = {
    {"int8", ZCX_INT8},         {"uint8", ZCX_UINT8},       {"int32", ZCX_INT32},
    {"uint32", ZCX_UINT32},     {"int64", ZCX_INT64},       {"uint64", ZCX_UINT64},
    {"half", ZCX_FLOAT16},      {"bfloat16", ZCX_BFLOAT16}, {"float", ZCX_FLOAT32},
    {"double", ZCX_FLOAT64},    {"char", ZCX_INT8},         {"int", ZCX_INT32},
    {"float16", ZCX_FLOAT16},   {"bf16", ZCX_BFLOAT16},     {"float32", ZCX_FLOAT32},
    {"float64", ZCX_FLOAT64}};

}  // namespace

// nccl-tests' binaries are named all_reduce, all_gather, reduce_scatter.
std::string canonical_op(std::string name) {
  std::erase(name, '_');
  for (const char* known : {"allreduce", "broadcast", "reduce", "allgather", "reducescatter",
                            "alltoall", "sendrecv"})
    if (name == known) return name;
  return "";
}

std::string parse_dtype(const std::string& text, zcx_dtype_t* out) {
  for (const NamedDtype& d : kDtypes)
    if (text == d.name) {
      *out = d.dtype;
      return "";
    }
  return "-d needs int8, uint8, int32, uint32, int64, uint64, half (float16), bfloat16, "
         "float (float32) or double (float64)";
}

std::string parse_redop(const std::string& text, zcx_redop_t* out) {
  for (int i = 0; i < ZCX_REDOP_COUNT; ++i)
    if (text == zcx_redop_name(static_cast<zcx_redop_t>(i))) {
      *out = static_cast<zcx_redop_t>(i);
      return "";
    }
  return "-o needs sum, prod, min, max or avg";
}

const char* dtype_label(zcx_dtype_t dtype) {
  for (const NamedDtype& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  return "?";
}

const char* redop_label(zcx_redop_t op) {
  return op >= 0 && op < ZCX_REDOP_COUNT ? zcx_redop_name(op) : "?";
}

}  // namespace zcx::perf
