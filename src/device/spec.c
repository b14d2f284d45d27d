/*
 * spec.c: device specs: "backend[:key=value,...]" parsed into a
 * device_config (with this host's defaults filled in), and the normalized
 * spec string a device reports.  Every bad key or value is one line naming
 * it ("device spec 'sim:cores=04': bad value '04' for key 'cores' ...").
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/backend.h"

#define DEVICE_DEFAULT_CORES 4u
/* Without mem=, the capacity is this share of the host's physical memory:
 * the sim backs device memory with host memory, so "device memory full" must
 * come before the host runs out (a sim device copy beside the host copy). */
#define DEVICE_DEFAULT_MEM_SHARE 2u

/* Every backend this build has; spec "name[:keys]" picks one. */
static const device_ops *const device_backends[] = {
    &device_sim_ops,
#ifdef HG_HAVE_OPENCL
    &device_opencl_ops,
#endif
};
#ifdef HG_HAVE_OPENCL
#define DEVICE_KNOWN "sim, opencl"
#else
#define DEVICE_KNOWN "sim (opencl: not built, no CL/cl.h at build time)"
#endif

/* -------------------------------------------------------------- spec keys */

enum spec_key {
    KEY_CORES,
    KEY_CUBE,
    KEY_VECTOR,
    KEY_MEM,
    KEY_LINK,
    KEY_FAIL_ALLOC,
    KEY_FAIL_COPY,
    KEY_FAIL_COMPLETE,
    KEY_PLATFORM,
    KEY_DEVICE,
    KEY_MAX_ALLOC,
    KEY_QUEUES,
    KEY_COUNT
};

static const char *const spec_key_names[KEY_COUNT] = {
    "cores",     "cube",          "vector",   "mem",    "link_gbps", "fail_alloc",
    "fail_copy", "fail_complete", "platform", "device", "max_alloc", "queues",
};

/* The keys only one backend takes (the rest are common to all). */
#define SIM_ONLY_KEYS ((1u << KEY_CORES) | (1u << KEY_CUBE) | (1u << KEY_VECTOR) | (1u << KEY_LINK))
#define OPENCL_ONLY_KEYS                                                                           \
    ((1u << KEY_PLATFORM) | (1u << KEY_DEVICE) | (1u << KEY_MAX_ALLOC) | (1u << KEY_QUEUES))
/* queues= at most: past this many in-order queues nothing runs faster. */
#define DEVICE_MAX_QUEUES 16u

typedef struct spec_parse {
    const char *spec; /* as the user gave it, for messages */
    char *errbuf;
    size_t errlen;
    unsigned seen; /* bit per enum spec_key */
} spec_parse;

/* Writes "device spec '<spec>': <message>" and returns HG_EINVAL (callers
 * with another code write the message this way and return their own). */
int device_spec_fail(const char *spec, char *errbuf, size_t errlen, const char *fmt, ...)
{
    if (errbuf == NULL || errlen == 0)
        return HG_EINVAL;
    char msg[DEVICE_SPEC_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(errbuf, errlen, "device spec '%.*s': %s", DEVICE_SPEC_MAX, spec ? spec : "(null)",
             msg);
    /* One line, as the header promises, whatever the spec held: a control
     * character (a newline in a spec read from a file) shows as '?'. */
    for (char *c = errbuf; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    return HG_EINVAL;
}

#define spec_fail(p, ...) device_spec_fail((p)->spec, (p)->errbuf, (p)->errlen, __VA_ARGS__)

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
    if (key == KEY_QUEUES) {
        if (v == 0 || v > DEVICE_MAX_QUEUES)
            return spec_fail(p, "queues=%s: want 1 to %u in-order queues", value,
                             DEVICE_MAX_QUEUES);
        cfg->cl_queues = (uint32_t)v;
        return 0;
    }
    if (key == KEY_PLATFORM || key == KEY_DEVICE) {
        if (v > UINT32_MAX)
            return spec_fail(p, "%s=%s: too large", spec_key_names[key], value);
        *(key == KEY_PLATFORM ? &cfg->cl_platform : &cfg->cl_device) = (uint32_t)v;
        return 0;
    }
    uint64_t *fault = key == KEY_FAIL_ALLOC      ? &cfg->fail_alloc
                      : key == KEY_FAIL_COPY     ? &cfg->fail_copy
                      : key == KEY_FAIL_COMPLETE ? &cfg->fail_complete
                                                 : NULL;
    if (fault != NULL && v == 0)
        return spec_fail(p, "%s=0 would inject nothing (want K >= 1: the K-th one fails)",
                         spec_key_names[key]);
    if (fault != NULL) {
        *fault = v;
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
    if (key == KEY_MAX_ALLOC) {
        if (!parse_bytes(value, &cfg->cl_max_alloc) || cfg->cl_max_alloc < HG_DEVICE_ALIGN)
            return spec_fail(p,
                             "bad value '%s' for key 'max_alloc' (want bytes >= %u, K/M/G "
                             "suffix)",
                             value, HG_DEVICE_ALIGN);
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
uint64_t device_default_mem(void)
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
    cfg->default_mem = device_default_mem();
    cfg->mem_default = !(p->seen & (1u << KEY_MEM));
    if (cfg->mem_default)
        cfg->mem_bytes = cfg->default_mem;
    return 0;
}

/* False (with the message) if a key given belongs to another backend. */
static bool spec_backend_keys(spec_parse *p, const device_ops *ops)
{
    bool sim = strcmp(ops->name, "sim") == 0;
    unsigned foreign = p->seen & (sim ? OPENCL_ONLY_KEYS : SIM_ONLY_KEYS);
    if (foreign == 0)
        return true;
    int k = __builtin_ctz(foreign);
    spec_fail(p, "key '%s' is not a key of device '%s'%s", spec_key_names[k], ops->name,
              sim ? " (platform=, device=, max_alloc= and queues= are opencl's)"
                  : " (an OpenCL device has the compute units it has; no link model)");
    return false;
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
        return spec_fail(p, "unknown device '%s' (known: " DEVICE_KNOWN ")", buf);
    while (keys != NULL) {
        char *next = strchr(keys, ',');
        if (next != NULL)
            *next++ = '\0';
        int rc = spec_item(p, cfg, keys);
        if (rc != 0)
            return rc;
        keys = next;
    }
    return spec_backend_keys(p, *ops) ? spec_finish(p, cfg) : HG_EINVAL;
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
void device_spec_normalize(const device_config *c, const device_ops *ops, uint64_t default_mem,
                           char *s, size_t n)
{
    const char *name = ops->name;
    size_t used;
    if (strcmp(name, "sim") != 0)
        used =
            (size_t)snprintf(s, n, "%s:platform=%u,device=%u", name, c->cl_platform, c->cl_device);
    else if (c->typed)
        used = (size_t)snprintf(s, n, "%s:cube=%u,vector=%u", name, c->ncube, c->nvector);
    else
        used = (size_t)snprintf(s, n, "%s:cores=%u", name, c->ncores);
    if (c->mem_bytes != default_mem && used < n) {
        char mem[32];
        format_bytes(mem, sizeof mem, c->mem_bytes);
        used += (size_t)snprintf(s + used, n - used, ",mem=%s", mem);
    }
    if (c->cl_max_alloc != 0 && used < n) {
        char bytes[32];
        format_bytes(bytes, sizeof bytes, c->cl_max_alloc);
        used += (size_t)snprintf(s + used, n - used, ",max_alloc=%s", bytes);
    }
    if (c->cl_queues != 0 && used < n)
        used += (size_t)snprintf(s + used, n - used, ",queues=%u", c->cl_queues);
    if (c->link_gbps > 0.0 && used < n)
        snprintf(s + used, n - used, ",link_gbps=%g", c->link_gbps);
}

int device_spec_parse(const char *spec, device_config *cfg, const device_ops **ops, char *errbuf,
                      size_t errlen)
{
    spec_parse p = {.spec = spec ? spec : "(null)", .errbuf = errbuf, .errlen = errlen};
    if (spec == NULL)
        return spec_fail(&p, "no spec given");
    return spec_parse_all(&p, cfg, ops);
}
