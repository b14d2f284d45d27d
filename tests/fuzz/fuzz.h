/*
 * fuzz.h: what every libFuzzer target under tests/fuzz/ shares.
 *
 * Each fuzz_<name>.c defines LLVMFuzzerTestOneInput and nothing global that
 * outlives one input: a target is deterministic given its bytes, so a crash
 * replays from its input alone (libFuzzer, or replay_<name> built with gcc).
 *
 *   - fz_in: the input read as a stream of small choices; past its end every
 *     read is 0, so any prefix of an input is an input.
 *   - fz_fail: a broken promise: prints it and aborts (libFuzzer keeps the
 *     input as a crash; the replay driver exits non-zero).
 *   - fz_known: the known-defect knob (tests/known_bugs.h): scenarios that
 *     reach a defect still being fixed are generated only when the defect's
 *     number is listed in HG_FUZZ_KNOWN_BUGS ("1,4,6,7" or "all").
 */
#ifndef HG_FUZZ_H
#define HG_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "known_bugs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz_in {
    const uint8_t *p;
    size_t n, pos;
} fz_in;

static inline uint8_t fz_u8(fz_in *in)
{
    return in->pos < in->n ? in->p[in->pos++] : 0;
}

static inline uint16_t fz_u16(fz_in *in)
{
    uint16_t hi = fz_u8(in);
    return (uint16_t)(hi << 8 | fz_u8(in));
}

/* A choice in [0, n), n >= 1: one byte for n <= 256, two above. */
static inline uint32_t fz_below(fz_in *in, uint32_t n)
{
    return (n <= 256 ? fz_u8(in) : fz_u16(in)) % n;
}

static inline bool fz_done(const fz_in *in)
{
    return in->pos >= in->n;
}

#define fz_fail(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "fuzz: %s:%d: ", __FILE__, __LINE__);                                      \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fprintf(stderr, "\n");                                                                     \
        abort();                                                                                   \
    } while (0)

/* True if known defect n may be generated (tests/known_bugs.h). */
static inline bool fz_known(unsigned n)
{
    return known_bug(n);
}

#endif
