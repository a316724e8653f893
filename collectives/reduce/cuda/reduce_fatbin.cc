// The reduction kernels' fatbin as data. bin2c writes a `const` array, which C++ would give
// internal linkage; declaring it extern first keeps the definition visible to reduce_cuda.cc
// (and hidden outside libzcx, like every zcx_coll_core symbol).
extern "C" const unsigned long long zcx_reduce_fatbin[];
#include "reduce_fatbin.inc"
