#ifndef FETCHD_CDIGEST_H
#define FETCHD_CDIGEST_H
#include <stddef.h>
#include <stdint.h>

/* SHA-256 block function on the CPU's SHA extensions (x86 SHA-NI), for download digests.
 * The portable path lives in Swift (FetchEngine/SHA256.swift); this is its fast path. */

/* 1 when this CPU has the SHA extensions (and SSE4.1), else 0. */
int fetchd_sha256_hw_available(void);

/* Runs the compression function over `blocks` 64-byte blocks. `state` is the usual
 * eight-word SHA-256 state (a, b, c, d, e, f, g, h). Only call when available. */
void fetchd_sha256_hw_blocks(uint32_t state[8], const uint8_t *data, size_t blocks);
#endif
