#include "CJanssonArena.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* Larger trees overflow into malloc; a request of a few hundred bytes needs about 1 KiB. */
#define ARENA_BYTES ((size_t)64 * 1024)

static __thread unsigned char *arena_base;
static __thread size_t arena_used;
/* Parses under way on this thread (nested ones share the arena until the outermost ends). */
static __thread unsigned arena_depth;
static pthread_key_t arena_key;

static int in_arena(const void *pointer) {
    uintptr_t p = (uintptr_t)pointer, base = (uintptr_t)arena_base;
    return arena_base != NULL && p >= base && p < base + ARENA_BYTES;
}

static void *arena_malloc(size_t size) {
    if (arena_depth > 0 && arena_base != NULL) {
        size_t need = (size + 15) & ~(size_t)15;  /* malloc's alignment */
        if (need >= size && need <= ARENA_BYTES - arena_used) {
            void *pointer = arena_base + arena_used;
            arena_used += need;
            return pointer;
        }
    }
    return malloc(size);
}

/* A block of this thread's arena is taken back all at once by the release; jansson frees
 * only on the thread that parsed (the tree never leaves fetchd_json_arena_loadb's caller). */
static void arena_free(void *pointer) {
    if (!in_arena(pointer)) free(pointer);
}

static void arena_thread_ended(void *base) { free(base); }

__attribute__((constructor)) static void arena_install(void) {
    pthread_key_create(&arena_key, arena_thread_ended);
    json_set_alloc_funcs(arena_malloc, arena_free);
}

void *fetchd_json_arena_loadb(const char *buffer, size_t length, size_t flags, void *error) {
    if (arena_base == NULL) {
        arena_base = malloc(ARENA_BYTES);
        if (arena_base != NULL) pthread_setspecific(arena_key, arena_base);
    }
    arena_depth += 1;
    return json_loadb(buffer, length, flags, (json_error_t *)error);
}

void fetchd_json_arena_release(void *root) {
    if (root != NULL) json_decref((json_t *)root);
    if (arena_depth > 0 && --arena_depth == 0) arena_used = 0;
}

size_t fetchd_json_arena_used(void) { return arena_used; }
