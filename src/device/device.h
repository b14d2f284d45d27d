/*
 * device.h: the backend interface and the generic device object.
 *
 * device.c owns what every backend shares: spec parsing of the common keys,
 * exact counters, fault injection, the normalized spec string.  A backend
 * (sim.c, later cuda.c) supplies memory, copies, address translation and its
 * cores through device_ops.  Stages above talk to the device only through the
 * public hg_devbuf_* calls and the device_* calls below.
 */
#ifndef HG_DEVICE_DEVICE_H
#define HG_DEVICE_DEVICE_H

#include <pthread.h>
#include <stdint.h>

#include "hostgraph.h"

/* The function every core runs for one device_run_cores call. */
typedef void (*device_core_fn)(void *ctx, uint32_t core, hg_core_type type);

/* Looks up the live allocation containing [addr, addr+bytes) and returns a
 * pointer usable by kernels on core threads.  NULL if out of range.  bytes
 * may be 0 (then addr must be inside or one past an allocation). */
void *device_translate(hg_device *dev, hg_devaddr addr, size_t bytes);

/* The live allocation containing addr: its base and size.  HG_ENOTFOUND. */
int device_find_alloc(hg_device *dev, hg_devaddr addr, hg_devaddr *base, size_t *size);

/* Runs fn(ctx, core, type) once on every core thread and returns when all
 * have returned.  Not reentrant: one call at a time per device. */
void device_run_cores(hg_device *dev, device_core_fn fn, void *ctx);

/* True if some core can run kernels of type `type` (CUBE or VECTOR). */
bool device_has_core_type(const hg_device *dev, hg_core_type type);

#endif
