// Names on the command line: collectives, dtypes and reduction ops, as nccl-tests spells
// them and as zcx names them. Shared by zcx-perf coll and zcx-plan.
#pragma once

#include <zcx/coll.h>

#include <string>

namespace zcx::perf {

// The collective's name without underscores ("all_reduce" -> "allreduce"); "" when unknown.
std::string canonical_op(std::string name);
// "" and *out set, or the message for -d / -o.
std::string parse_dtype(const std::string& text, zcx_dtype_t* out);
std::string parse_redop(const std::string& text, zcx_redop_t* out);
// Names as nccl-tests prints them ("float", "half", "bfloat16", "sum", ...).
const char* dtype_label(zcx_dtype_t dtype);
const char* redop_label(zcx_redop_t op);

}  // namespace zcx::perf
