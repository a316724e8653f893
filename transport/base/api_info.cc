// Public C API: version and error strings.
#include "common/status.h"

#include <zcx/config.h>
#include <zcx/zcx.h>

extern "C" {

ZCX_API const char* zcx_version_string(void) { return ZCX_VERSION_STRING; }

ZCX_API int zcx_version(void) {
  return ZCX_VERSION_MAJOR * 10000 + ZCX_VERSION_MINOR * 100 + ZCX_VERSION_PATCH;
}

ZCX_API const char* zcx_status_string(zcx_status_t status) {
  if (status < 0 || status >= ZCX_STATUS_COUNT) return "unknown status";
  return zcx::status_name(static_cast<zcx::Status>(status));
}

ZCX_API const char* zcx_get_last_error(void) { return zcx::last_error(); }

}  // extern "C"
