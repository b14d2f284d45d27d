/*
 * test_device.h: opening a device in a test, with the spec error printed
 * when it fails (the test then fails on its ASSERT of a non-NULL device).
 */
#ifndef HG_TEST_DEVICE_H
#define HG_TEST_DEVICE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostgraph.h"

static inline hg_device *test_device_open(const char *spec)
{
    hg_device *dev = NULL;
    char msg[256] = "";
    if (hg_device_open(spec, &dev, msg, sizeof msg) != 0)
        fprintf(stderr, "  open '%s': %s\n", spec, msg);
    return dev;
}

/* The backends every conformance test runs against (IREE's hal/cts habit). */
static const char *const test_backends[] = {"sim", "opencl"};
#define TEST_NBACKENDS (sizeof test_backends / sizeof *test_backends)

/* Opens backend[:keys].  A backend this machine cannot open for want of the
 * backend itself (not built, no library, no platform) prints
 * "skipped: no OpenCL platform (why)" and sets *skipped, unless
 * HG_REQUIRE_OPENCL=1 (CI with PoCL), where it is a failure like any other
 * (NULL with the message printed, *skipped false). */
static inline hg_device *test_backend_open(const char *backend, const char *keys, bool *skipped)
{
    char spec[256], msg[256] = "";
    snprintf(spec, sizeof spec, "%s%s%s", backend, keys && *keys ? ":" : "", keys ? keys : "");
    hg_device *dev = NULL;
    *skipped = false;
    if (hg_device_open(spec, &dev, msg, sizeof msg) == 0)
        return dev;
    const char *req = getenv("HG_REQUIRE_OPENCL");
    bool missing = strstr(msg, "unknown device 'opencl'") || strstr(msg, "cannot load") ||
                   strstr(msg, "no OpenCL platform");
    if (strcmp(backend, "opencl") == 0 && missing && !(req && strcmp(req, "1") == 0)) {
        printf("     skipped: no OpenCL platform (%s)\n", msg);
        *skipped = true;
        return NULL;
    }
    fprintf(stderr, "  open '%s': %s\n", spec, msg);
    return NULL;
}

/* True (having printed why) when backend's tests are to be skipped here
 * (test_backend_open's rule).  False when it opens, and also when it fails
 * to open for another reason: the test's own open then fails it loudly. */
static inline bool test_backend_skipped(const char *backend)
{
    bool skipped;
    hg_device *dev = test_backend_open(backend, NULL, &skipped);
    if (dev != NULL)
        hg_device_close(dev);
    return skipped;
}

#endif
