/*
 * device.c: the generic device object, shared by every backend.
 *
 * Owns spec parsing and the normalized spec string, exact counters, the
 * capacity check, fault injection, argument validation of the public
 * hg_devbuf_* calls, and dispatch to the backend's device_ops (backend.h).
 *
 * Invariants:
 *   - counters count successful operations only: a call that fails (bad
 *     argument, range, capacity, injected fault, backend) changes none;
 *   - live_bytes is the sum of the spans of live allocations (each size
 *     rounded up to HG_DEVICE_ALIGN, as a real device's allocator rounds)
 *     and never exceeds the capacity (mem=); peak_bytes is the largest
 *     live_bytes seen;
 *   - every counted operation is also added, under the same lock, to the
 *     caller's tally when it passes one (device.h): a runner's own counts,
 *     exact even while other runners use the device;
 *   - an armed fault counts every allocation / copy that passed argument and
 *     range validation, the runtime's and the user's alike; the k-th fails
 *     once, doing nothing, and the fault disarms itself;
 *   - counters and fault state change only under dev->lock, so several
 *     threads may share a device.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/backend.h"

#define DEVICE_SPEC_MAX      256
#define DEVICE_DEFAULT_CORES 4u
/* Without mem=, the capacity is this share of the host's physical memory:
 * the sim backs device memory with host memory, so "device memory full" must
 * come before the host runs out (a sim device copy beside the host copy). */
#define DEVICE_DEFAULT_MEM_SHARE 2u

struct hg_device {
    const device_ops *ops;
    void *state; /* the backend's */
    device_config cfg;
    char spec[DEVICE_SPEC_MAX];
    uint64_t default_mem; /* this host's default capacity */
    pthread_mutex_t lock; /* counters and faults */
    hg_device_counters counters;
    uint64_t fault_alloc; /* allocations left until the injected failure; 0: off */
    uint64_t fault_copy;  /* copies left until the injected failure; 0: off */
};

/* Every backend this build has; spec "name[:keys]" picks one. */
static const device_ops *const device_backends[] = {&device_sim_ops};

/* -------------------------------------------------------------- spec keys */

enum spec_key {
    KEY_CORES,
    KEY_CUBE,
    KEY_VECTOR,
    KEY_MEM,
    KEY_LINK,
    KEY_FAIL_ALLOC,
    KEY_FAIL_COPY,
    KEY_COUNT
};

static const char *const spec_key_names[KEY_COUNT] = {
    "cores", "cube", "vector", "mem", "link_gbps", "fail_alloc", "fail_copy",
};

typedef struct spec_parse {
    const char *spec; /* as the user gave it, for messages */
    char *errbuf;
    size_t errlen;
    unsigned seen; /* bit per enum spec_key */
} spec_parse;

/* Writes "device spec '<spec>': <message>" and returns HG_EINVAL (callers
 * with another code write the message this way and return their own). */
static int spec_fail(const spec_parse *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int spec_fail(const spec_parse *p, const char *fmt, ...)
{
    if (p->errbuf == NULL || p->errlen == 0)
        return HG_EINVAL;
    char msg[DEVICE_SPEC_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(p->errbuf, p->errlen, "device spec '%.*s': %s", DEVICE_SPEC_MAX, p->spec, msg);
    return HG_EINVAL;
}

/* Decimal digits only: no sign, no spaces, no leading zero (so "04" is not
 * silently read as 4), no overflow. */
static bool parse_u64_n(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || (len > 1 && s[0] == '0'))
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* A byte count with an optional K, M or G (binary) suffix. */
static bool parse_bytes(const char *s, uint64_t *out)
{
    size_t len = strlen(s);
    unsigned shift = 0;
    const char *suffix = len ? strchr("KMGkmg", s[len - 1]) : NULL;
    if (suffix != NULL && *suffix != '\0') {
        shift = 10u * (1u + (unsigned)((suffix - "KMGkmg") % 3));
        len--;
    }
    uint64_t v;
    if (!parse_u64_n(s, len, &v) || v > (UINT64_MAX >> shift))
        return false;
    *out = v << shift;
    return true;
}

/* A finite, positive decimal number. */
static bool parse_gbps(const char *s, double *out)
{
    if ((*s < '0' || *s > '9') && *s != '.')
        return false;
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v) || v <= 0.0)
        return false;
    *out = v;
    return true;
}

static int spec_set_count(spec_parse *p, device_config *cfg, enum spec_key key, const char *value)
{
    uint64_t v;
    if (!parse_u64_n(value, strlen(value), &v))
        return spec_fail(p, "bad value '%s' for key '%s' (want a whole number, no leading zero)",
                         value, spec_key_names[key]);
    if ((key == KEY_FAIL_ALLOC || key == KEY_FAIL_COPY) && v == 0)
        return spec_fail(p, "%s=0 would inject nothing (want K >= 1: the K-th one fails)",
                         spec_key_names[key]);
    if (key == KEY_FAIL_ALLOC || key == KEY_FAIL_COPY) {
        *(key == KEY_FAIL_ALLOC ? &cfg->fail_alloc : &cfg->fail_copy) = v;
        return 0;
    }
    if (v > DEVICE_MAX_CORES)
        return spec_fail(p, "%s=%s: at most %u cores", spec_key_names[key], value,
                         DEVICE_MAX_CORES);
    uint32_t n = (uint32_t)v;
    if (key == KEY_CORES && n == 0)
        return spec_fail(p, "cores=0: a device needs at least one core");
    if (key == KEY_CORES)
        cfg->ncores = n;
    else
        *(key == KEY_CUBE ? &cfg->ncube : &cfg->nvector) = n;
    return 0;
}

static int spec_set(spec_parse *p, device_config *cfg, enum spec_key key, const char *value)
{
    if (p->seen & (1u << key))
        return spec_fail(p, "key '%s' given twice", spec_key_names[key]);
    p->seen |= 1u << key;
    if (key == KEY_MEM) {
        if (!parse_bytes(value, &cfg->mem_bytes) || cfg->mem_bytes == 0)
            return spec_fail(p, "bad value '%s' for key 'mem' (want bytes > 0, K/M/G suffix)",
                             value);
        return 0;
    }
    if (key == KEY_LINK) {
        if (!parse_gbps(value, &cfg->link_gbps))
            return spec_fail(p, "bad value '%s' for key 'link_gbps' (want a number > 0)", value);
        return 0;
    }
    return spec_set_count(p, cfg, key, value);
}

/* One "key=value" item; item is a writable copy. */
static int spec_item(spec_parse *p, device_config *cfg, char *item)
{
    char *eq = strchr(item, '=');
    if (*item == '\0')
        return spec_fail(p, "empty key");
    if (eq == NULL)
        return spec_fail(p, "key '%s' has no value (want key=value)", item);
    *eq = '\0';
    for (int k = 0; k < KEY_COUNT; k++)
        if (strcmp(item, spec_key_names[k]) == 0)
            return spec_set(p, cfg, (enum spec_key)k, eq + 1);
    return spec_fail(p, "unknown key '%s' (value '%s')", item, eq + 1);
}

/* DEVICE_DEFAULT_MEM_SHARE of physical memory, in whole MiB; 1 GiB if the
 * host will not say. */
static uint64_t device_default_mem(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 1ull << 30;
    uint64_t bytes = (uint64_t)pages * (uint64_t)page / DEVICE_DEFAULT_MEM_SHARE;
    bytes &= ~((1ull << 20) - 1);
    return bytes > 0 ? bytes : 1ull << 30;
}

/* Checks how the core keys combine and fills in the defaults. */
static int spec_finish(spec_parse *p, device_config *cfg)
{
    bool cores = p->seen & (1u << KEY_CORES);
    cfg->typed = p->seen & ((1u << KEY_CUBE) | (1u << KEY_VECTOR));
    if (cores && cfg->typed)
        return spec_fail(p, "cores=%u cannot be combined with cube/vector", cfg->ncores);
    if (cfg->typed) {
        if (cfg->ncube + cfg->nvector == 0)
            return spec_fail(p, "cube=0,vector=0: a device needs at least one core");
        if (cfg->ncube + cfg->nvector > DEVICE_MAX_CORES)
            return spec_fail(p, "cube=%u,vector=%u: at most %u cores", cfg->ncube, cfg->nvector,
                             DEVICE_MAX_CORES);
        cfg->ncores = cfg->ncube + cfg->nvector;
    } else if (!cores) {
        cfg->ncores = DEVICE_DEFAULT_CORES;
    }
    if (!(p->seen & (1u << KEY_MEM)))
        cfg->mem_bytes = device_default_mem();
    return 0;
}

static const device_ops *spec_backend(const char *name)
{
    for (size_t i = 0; i < sizeof device_backends / sizeof *device_backends; i++)
        if (strcmp(name, device_backends[i]->name) == 0)
            return device_backends[i];
    return NULL;
}

/* Parses "backend[:key=value,...]" into cfg and picks its backend. */
static int spec_parse_all(spec_parse *p, device_config *cfg, const device_ops **ops)
{
    char buf[DEVICE_SPEC_MAX];
    if (strlen(p->spec) >= sizeof buf)
        return spec_fail(p, "longer than %d characters", DEVICE_SPEC_MAX - 1);
    strcpy(buf, p->spec);
    char *keys = strchr(buf, ':');
    if (keys != NULL)
        *keys++ = '\0';
    *ops = spec_backend(buf);
    if (*ops == NULL)
        return spec_fail(p, "unknown device '%s' (known: sim)", buf);
    while (keys != NULL) {
        char *next = strchr(keys, ',');
        if (next != NULL)
            *next++ = '\0';
        int rc = spec_item(p, cfg, keys);
        if (rc != 0)
            return rc;
        keys = next;
    }
    return spec_finish(p, cfg);
}

/* ------------------------------------------------------ normalized spec */

/* "1G", "512M", "3000": the largest suffix that divides the value. */
static void format_bytes(char *out, size_t len, uint64_t v)
{
    static const char suffix[] = "GMK";
    for (int i = 0; i < 3; i++) {
        unsigned shift = 30u - 10u * (unsigned)i;
        if (v % (1ull << shift) == 0) {
            snprintf(out, len, "%llu%c", (unsigned long long)(v >> shift), suffix[i]);
            return;
        }
    }
    snprintf(out, len, "%llu", (unsigned long long)v);
}

/* Fault keys are left out: they describe a test, not the device.  mem only
 * when it differs from the default, the link model always when on (a capped
 * link changes every timing, so it must show). */
static void device_normalize_spec(hg_device *dev)
{
    const device_config *c = &dev->cfg;
    const char *name = dev->ops->name;
    char *s = dev->spec;
    size_t n = sizeof dev->spec, used;
    if (c->typed)
        used = (size_t)snprintf(s, n, "%s:cube=%u,vector=%u", name, c->ncube, c->nvector);
    else
        used = (size_t)snprintf(s, n, "%s:cores=%u", name, c->ncores);
    if (c->mem_bytes != dev->default_mem && used < n) {
        char mem[32];
        format_bytes(mem, sizeof mem, c->mem_bytes);
        used += (size_t)snprintf(s + used, n - used, ",mem=%s", mem);
    }
    if (c->link_gbps > 0.0 && used < n)
        snprintf(s + used, n - used, ",link_gbps=%g", c->link_gbps);
}

/* ---------------------------------------------------------- open / close */

int hg_device_open(const char *spec, hg_device **out, char *errbuf, size_t errlen)
{
    spec_parse p = {.spec = spec ? spec : "(null)", .errbuf = errbuf, .errlen = errlen};
    if (errbuf != NULL && errlen > 0)
        errbuf[0] = '\0';
    if (out == NULL)
        return spec_fail(&p, "no place for the device (out is NULL)");
    *out = NULL;
    if (spec == NULL)
        return spec_fail(&p, "no spec given");
    device_config cfg = {0};
    const device_ops *ops = NULL;
    int rc = spec_parse_all(&p, &cfg, &ops);
    if (rc != 0)
        return rc;
    hg_device *dev = calloc(1, sizeof *dev);
    if (dev == NULL) {
        spec_fail(&p, "out of host memory");
        return HG_ENOMEM;
    }
    dev->ops = ops;
    dev->cfg = cfg;
    dev->default_mem = device_default_mem();
    dev->fault_alloc = cfg.fail_alloc;
    dev->fault_copy = cfg.fail_copy;
    rc = ops->open(&dev->cfg, &dev->state);
    if (rc != 0) {
        spec_fail(&p, "backend '%s' could not start with mem=%llu bytes (%s)", ops->name,
                  (unsigned long long)cfg.mem_bytes, hg_strerror(rc));
        free(dev);
        return rc;
    }
    pthread_mutex_init(&dev->lock, NULL);
    device_normalize_spec(dev);
    *out = dev;
    return 0;
}

void hg_device_close(hg_device *dev)
{
    if (dev == NULL)
        return;
    dev->ops->close(dev->state);
    pthread_mutex_destroy(&dev->lock);
    free(dev);
}

/* ------------------------------------------------------------- queries */

const char *hg_device_spec(const hg_device *dev)
{
    return dev ? dev->spec : "";
}

uint64_t hg_device_capacity(const hg_device *dev)
{
    return dev ? dev->cfg.mem_bytes : 0;
}

uint32_t hg_device_num_cores(const hg_device *dev)
{
    return dev ? dev->cfg.ncores : 0;
}

hg_core_type hg_device_core_type(const hg_device *dev, uint32_t core)
{
    if (dev == NULL || core >= dev->cfg.ncores)
        return HG_CORE_ANY;
    return device_config_core_type(&dev->cfg, core);
}

bool device_has_core_type(const hg_device *dev, hg_core_type type)
{
    if (dev == NULL)
        return false;
    if (!dev->cfg.typed || type == HG_CORE_ANY)
        return true;
    return (type == HG_CORE_CUBE ? dev->cfg.ncube : dev->cfg.nvector) > 0;
}

void hg_device_counters_get(const hg_device *dev, hg_device_counters *out)
{
    if (out == NULL)
        return;
    if (dev == NULL) {
        memset(out, 0, sizeof *out);
        return;
    }
    /* The lock is not part of the device's observable state. */
    pthread_mutex_t *lock = (pthread_mutex_t *)&dev->lock;
    pthread_mutex_lock(lock);
    *out = dev->counters;
    pthread_mutex_unlock(lock);
}

/* ------------------------------------------------------ fault injection */

int hg_device_inject_fault(hg_device *dev, hg_fault kind, uint64_t k)
{
    if (dev == NULL || (kind != HG_FAULT_ALLOC && kind != HG_FAULT_COPY))
        return HG_EINVAL;
    pthread_mutex_lock(&dev->lock);
    *(kind == HG_FAULT_ALLOC ? &dev->fault_alloc : &dev->fault_copy) = k;
    pthread_mutex_unlock(&dev->lock);
    return 0;
}

/* Counts one operation against an armed fault; true if this one must fail.
 * Caller holds dev->lock. */
static bool device_fault_fires(uint64_t *left)
{
    if (*left == 0)
        return false;
    return --*left == 0;
}

/* ------------------------------------------------------- device memory */

/* The device bytes an allocation of `bytes` holds; false past the range. */
static bool device_span(size_t bytes, uint64_t *span)
{
    if (bytes > UINT64_MAX - (HG_DEVICE_ALIGN - 1))
        return false;
    *span = ((uint64_t)bytes + HG_DEVICE_ALIGN - 1) & ~(uint64_t)(HG_DEVICE_ALIGN - 1);
    return true;
}

/* Adds one allocation of `span` bytes to a counter set. */
static void counters_alloc(hg_device_counters *c, uint64_t span)
{
    c->allocs++;
    c->live_bytes += span;
    if (c->live_bytes > c->peak_bytes)
        c->peak_bytes = c->live_bytes;
}

int device_malloc(hg_device *dev, size_t bytes, hg_devaddr *out, hg_device_counters *tally)
{
    if (dev == NULL || out == NULL || bytes == 0)
        return HG_EINVAL;
    *out = 0;
    uint64_t span;
    if (!device_span(bytes, &span))
        return HG_EDEVMEM;
    hg_devaddr addr = 0;
    pthread_mutex_lock(&dev->lock);
    hg_device_counters *c = &dev->counters;
    int rc = device_fault_fires(&dev->fault_alloc) ? HG_EDEVMEM : 0;
    if (rc == 0 && span > dev->cfg.mem_bytes - c->live_bytes)
        rc = HG_EDEVMEM;
    if (rc == 0)
        rc = dev->ops->malloc(dev->state, bytes, &addr);
    if (rc == 0) {
        counters_alloc(c, span);
        if (tally != NULL)
            counters_alloc(tally, span);
        *out = addr;
    }
    pthread_mutex_unlock(&dev->lock);
    return rc;
}

int device_free(hg_device *dev, hg_devaddr addr, hg_device_counters *tally)
{
    if (dev == NULL)
        return HG_EINVAL;
    size_t bytes = 0;
    uint64_t span = 0;
    pthread_mutex_lock(&dev->lock);
    int rc = dev->ops->free(dev->state, addr, &bytes);
    if (rc == 0) {
        device_span(bytes, &span); /* cannot fail: the allocation had a span */
        dev->counters.frees++;
        dev->counters.live_bytes -= span;
        if (tally != NULL) {
            tally->frees++;
            tally->live_bytes -= span < tally->live_bytes ? span : tally->live_bytes;
        }
    }
    pthread_mutex_unlock(&dev->lock);
    return rc;
}

int hg_devbuf_malloc(hg_device *dev, size_t bytes, hg_devaddr *out)
{
    return device_malloc(dev, bytes, out, NULL);
}

int hg_devbuf_free(hg_device *dev, hg_devaddr addr)
{
    return device_free(dev, addr, NULL);
}

/* Validates every range of a batch (nothing moves unless all are valid) and
 * counts the armed copy fault across its non-empty ranges.  Returns
 * HG_EINVAL / HG_ERANGE, or 0 with *ok the number of leading ranges that may
 * go ahead (n unless the fault fires inside the batch). */
static int device_batch_begin(hg_device *dev, const device_copy *list, size_t n, size_t *ok)
{
    if (dev == NULL || (list == NULL && n != 0))
        return HG_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (list[i].bytes == 0)
            continue;
        if (list[i].host == NULL)
            return HG_EINVAL;
        if (dev->ops->translate(dev->state, list[i].dev, list[i].bytes) == NULL)
            return HG_ERANGE;
    }
    *ok = n;
    pthread_mutex_lock(&dev->lock);
    for (size_t i = 0; i < n; i++) {
        if (list[i].bytes != 0 && device_fault_fires(&dev->fault_copy)) {
            *ok = i;
            break;
        }
    }
    pthread_mutex_unlock(&dev->lock);
    return 0;
}

/* Counts the first n ranges of a finished batch (one batch call if any
 * range moved bytes) on the device and on the caller's tally. */
static void device_batch_count(hg_device *dev, bool to_device, const device_copy *list, size_t n,
                               hg_device_counters *tally)
{
    uint64_t bytes = 0, ranges = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += list[i].bytes;
        ranges += list[i].bytes != 0;
    }
    if (ranges == 0)
        return;
    pthread_mutex_lock(&dev->lock);
    for (hg_device_counters *c = &dev->counters; c != NULL; c = c == tally ? NULL : tally) {
        *(to_device ? &c->h2d_bytes : &c->d2h_bytes) += bytes;
        *(to_device ? &c->h2d_copies : &c->d2h_copies) += ranges;
        (*(to_device ? &c->h2d_batches : &c->d2h_batches))++;
    }
    pthread_mutex_unlock(&dev->lock);
}

/* The synchronous default for a backend without copy_batch: one call per
 * range (IREE's queue emulation habit: a simple backend needs nothing new). */
static int device_batch_run(hg_device *dev, bool to_device, const device_copy *list, size_t n)
{
    if (dev->ops->copy_batch != NULL)
        return dev->ops->copy_batch(dev->state, to_device, list, n);
    for (size_t i = 0; i < n; i++) {
        if (list[i].bytes == 0)
            continue;
        int rc = to_device
                     ? dev->ops->copy_to(dev->state, list[i].dev, list[i].host, list[i].bytes)
                     : dev->ops->copy_from(dev->state, list[i].host, list[i].dev, list[i].bytes);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int device_copy_batch(hg_device *dev, bool to_device, const device_copy *list, size_t n,
                      hg_device_counters *tally, size_t *done)
{
    size_t ok = 0;
    if (done != NULL)
        *done = 0;
    int rc = device_batch_begin(dev, list, n, &ok);
    if (rc != 0)
        return rc;
    rc = device_batch_run(dev, to_device, list, ok);
    if (rc != 0)
        return rc;
    device_batch_count(dev, to_device, list, ok, tally);
    if (done != NULL)
        *done = ok;
    return ok < n ? HG_ECOPY : 0;
}

/* A zero-byte copy moves nothing: it succeeds without counting (a non-NULL
 * device is all it needs). */
int device_copy_to(hg_device *dev, hg_devaddr dst, const void *src, size_t bytes,
                   hg_device_counters *tally)
{
    device_copy one = {(void *)src, dst, bytes};
    if (src == NULL && bytes != 0)
        return HG_EINVAL;
    return device_copy_batch(dev, true, &one, 1, tally, NULL);
}

int device_copy_from(hg_device *dev, void *dst, hg_devaddr src, size_t bytes,
                     hg_device_counters *tally)
{
    device_copy one = {dst, src, bytes};
    if (dst == NULL && bytes != 0)
        return HG_EINVAL;
    return device_copy_batch(dev, false, &one, 1, tally, NULL);
}

int hg_devbuf_copy_to(hg_device *dev, hg_devaddr dst, const void *src, size_t bytes)
{
    return device_copy_to(dev, dst, src, bytes, NULL);
}

int hg_devbuf_copy_from(hg_device *dev, void *dst, hg_devaddr src, size_t bytes)
{
    return device_copy_from(dev, dst, src, bytes, NULL);
}

int device_fill(hg_device *dev, hg_devaddr dst, int value, size_t bytes)
{
    if (dev == NULL)
        return HG_EINVAL;
    if (bytes == 0)
        return 0;
    return dev->ops->fill(dev->state, dst, value, bytes);
}

/* -------------------------------------------------- internal interface */

void *device_translate(hg_device *dev, hg_devaddr addr, size_t bytes)
{
    return dev ? dev->ops->translate(dev->state, addr, bytes) : NULL;
}

int device_find_alloc(hg_device *dev, hg_devaddr addr, hg_devaddr *base, size_t *size)
{
    if (dev == NULL || base == NULL || size == NULL)
        return HG_EINVAL;
    return dev->ops->find_alloc(dev->state, addr, base, size);
}

void device_run_cores(hg_device *dev, device_core_fn fn, void *ctx)
{
    if (dev != NULL && fn != NULL)
        dev->ops->run_cores(dev->state, fn, ctx);
}
