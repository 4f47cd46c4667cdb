#ifndef FETCHD_CJANSSON_SHIM_H
#define FETCHD_CJANSSON_SHIM_H
#include <jansson.h>

/* Swift cannot see jansson's macros that wrap inline functions; typed wrappers. */
static inline json_type fetchd_json_typeof(const json_t *j) { return json_typeof(j); }
static inline size_t fetchd_json_dumps_flags(int precision) {
    return JSON_COMPACT | JSON_REAL_PRECISION(precision) | JSON_ENCODE_ANY;
}
#endif
