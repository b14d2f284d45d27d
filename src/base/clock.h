/* clock.h: the monotonic clock every span and benchmark uses. */
#ifndef HG_BASE_CLOCK_H
#define HG_BASE_CLOCK_H

#include <stdint.h>

/* Nanoseconds from CLOCK_MONOTONIC. */
uint64_t clock_now_ns(void);

#endif
