#ifndef FETCHD_CJANSSONARENA_H
#define FETCHD_CJANSSONARENA_H
#include <stddef.h>

/* jansson's parse with its tree allocated from a per-thread arena (json_set_alloc_funcs,
 * installed when the program loads). A request's parse made about a dozen mallocs and as many
 * frees, for a tree that lives only until it is read into Swift values.
 *
 * fetchd_json_arena_loadb parses like json_loadb(buffer, length, flags, error) and returns
 * the root (a json_t *) or NULL; the tree is read on the same thread, and then given to
 * fetchd_json_arena_release (also for NULL), on that thread, before anything else keeps a
 * pointer into it. Types are void * so that this header does not include jansson.h a second
 * time into another module. Anything jansson allocates outside these calls, or beyond the
 * arena's size, comes from malloc as before. */
void *fetchd_json_arena_loadb(const char *buffer, size_t length, size_t flags, void *error);
void fetchd_json_arena_release(void *root);

/* Bytes of this thread's arena in use (0 between parses), for tests. */
size_t fetchd_json_arena_used(void);
#endif
