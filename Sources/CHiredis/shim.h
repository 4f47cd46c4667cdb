#ifndef FETCHD_CHIREDIS_SHIM_H
#define FETCHD_CHIREDIS_SHIM_H
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#endif
