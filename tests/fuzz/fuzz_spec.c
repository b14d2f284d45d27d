/*
 * fuzz_spec.c: the device spec parser (hg_device_open's "sim:cores=2,...").
 *
 * The input is the spec string; its first byte (when there is more than
 * one) sizes the error buffer, so short buffers truncate messages.
 * Promises checked: the parser returns 0 or HG_EINVAL; a refusal writes one
 * line "device spec '...': ..." that fits the buffer; an accepted spec has
 * at least one core and a capacity, and its normalized form parses to the
 * same device (cores, types, capacity, link model) and normalizes to
 * itself.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "device/backend.h"
#include "fuzz.h"

static void check_same(const char *spec, const device_config *a, const device_config *b)
{
    if (a->typed != b->typed || a->ncores != b->ncores || a->ncube != b->ncube ||
        a->nvector != b->nvector || a->mem_bytes != b->mem_bytes ||
        fabs(a->link_gbps - b->link_gbps) > 1e-5 * a->link_gbps)
        fz_fail("'%s' normalizes to a spec of another device", spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t errlen = size > 1 ? data[0] % 200 : 128;
    if (size > 1) {
        data++;
        size--;
    }
    char spec[2 * DEVICE_SPEC_MAX];
    if (size >= sizeof spec)
        size = sizeof spec - 1;
    memcpy(spec, data, size);
    spec[size] = '\0';
    char err[200], *errbuf = errlen ? err : NULL;
    memset(err, 'x', sizeof err);
    device_config cfg = {0}; /* as hg_device_open passes it */
    const device_ops *ops;
    int rc = device_spec_parse(spec, &cfg, &ops, errbuf, errlen);
    if (rc == HG_EINVAL) {
        if (errlen == 0)
            return 0;
        /* One line, whatever the spec held: no control character at all. */
        bool control = false;
        for (const char *c = err; memchr(err, '\0', errlen) != NULL && *c != '\0'; c++)
            control |= (unsigned char)*c < 0x20 || *c == 0x7f;
        if (memchr(err, '\0', errlen) == NULL || control)
            fz_fail("'%s': the message does not fit %zu bytes as one line", spec, errlen);
        if (errlen > 14 && strncmp(err, "device spec '", 13) != 0)
            fz_fail("'%s': message '%s' does not name the spec", spec, err);
        return 0;
    }
    if (rc != 0)
        fz_fail("'%s': rc %d, 0 or HG_EINVAL expected", spec, rc);
    if (cfg.ncores < 1 || cfg.mem_bytes == 0 ||
        (cfg.typed && cfg.ncube + cfg.nvector != cfg.ncores))
        fz_fail("'%s': %u cores (%u cube, %u vector), %llu bytes", spec, cfg.ncores, cfg.ncube,
                cfg.nvector, (unsigned long long)cfg.mem_bytes);
    uint64_t def = device_default_mem();
    char norm[DEVICE_SPEC_MAX], again[DEVICE_SPEC_MAX];
    device_spec_normalize(&cfg, ops, def, norm, sizeof norm);
    device_config cfg2 = {0};
    const device_ops *ops2;
    if (device_spec_parse(norm, &cfg2, &ops2, err, sizeof err) != 0)
        fz_fail("'%s' normalizes to '%s', which is refused: %s", spec, norm, err);
    check_same(spec, &cfg, &cfg2);
    device_spec_normalize(&cfg2, ops2, def, again, sizeof again);
    if (ops2 != ops || strcmp(norm, again) != 0)
        fz_fail("'%s' normalizes to '%s', then to '%s'", spec, norm, again);
    return 0;
}
