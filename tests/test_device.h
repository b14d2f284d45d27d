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
#include "testlib.h"

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

/* Whether backend b of test_backends opens on this machine: probed once per
 * process (a skipped backend prints its "skipped: ..." line once). */
static inline bool test_backend_available(size_t b)
{
    static int known[TEST_NBACKENDS]; /* 0 unknown, 1 yes, -1 no */
    if (known[b] == 0)                /* an open that fails for another reason runs, and fails */
        known[b] = test_backend_skipped(test_backends[b]) ? -1 : 1;
    return known[b] > 0;
}

/* Opens backend with a sim spec's keys ("cores=2,mem=1M"), dropping the keys
 * only the sim has (cores=, cube=, vector=, link_gbps=) on any other
 * backend: a test written for "sim:cores=2,mem=1M" runs on opencl with
 * "mem=1M".  NULL (the error printed) when it does not open. */
static inline hg_device *test_device_on(const char *backend, const char *keys)
{
    static const char *const sim_only[] = {"cores=", "cube=", "vector=", "link_gbps="};
    char kept[256] = "", copy[256];
    snprintf(copy, sizeof copy, "%s", keys ? keys : "");
    bool sim = strcmp(backend, "sim") == 0;
    for (char *save = NULL, *k = strtok_r(copy, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        bool drop = false;
        for (size_t i = 0; !sim && i < sizeof sim_only / sizeof *sim_only; i++)
            drop = drop || strncmp(k, sim_only[i], strlen(sim_only[i])) == 0;
        if (!drop)
            snprintf(kept + strlen(kept), sizeof kept - strlen(kept), "%s%s", *kept ? "," : "", k);
    }
    bool skipped;
    return test_backend_open(backend, kept, &skipped);
}

/* TEST_EACH_BACKEND(name) { body }: a test whose body runs once per
 * available backend, with `backend` naming it ("sim", "opencl"); the body
 * opens its devices with test_device_on(backend, keys).  An ASSERT that
 * fails stops the loop; the line above it names the backend. */
typedef void (*test_backend_body)(const char *backend);

/* Whether HG_TEST_BACKENDS (a comma-separated list; unset: every backend)
 * names backend.  The sanitizer builds set it to "sim" for the staging
 * conformance tests that CMakeLists.txt names (HG_SANITIZER_SIM_ONLY_TESTS):
 * the normal build runs them on every backend. */
static inline bool test_backend_listed(const char *backend)
{
    const char *only = getenv("HG_TEST_BACKENDS");
    if (only == NULL || *only == '\0')
        return true;
    size_t n = strlen(backend);
    for (const char *p = only; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, backend, n) == 0)
            return true;
        p += len + (end != NULL);
    }
    return false;
}

static inline void test_each_backend(test_backend_body body)
{
    for (size_t b = 0; b < TEST_NBACKENDS && !test_failed_now; b++) {
        if (!test_backend_listed(test_backends[b])) {
            printf("     skipped: backend %s (HG_TEST_BACKENDS=%s)\n", test_backends[b],
                   getenv("HG_TEST_BACKENDS"));
            continue;
        }
        if (!test_backend_available(b))
            continue;
        printf("     backend %s\n", test_backends[b]);
        fflush(stdout);
        body(test_backends[b]);
    }
}

#define TEST_EACH_BACKEND(name)                                                                    \
    static void name##_each(const char *backend);                                                  \
    TEST(name)                                                                                     \
    {                                                                                              \
        test_each_backend(name##_each);                                                            \
    }                                                                                              \
    static void name##_each(const char *backend)

/* Whether backend runs kernels on host cores through host pointers (the
 * sim), where a kernel's hg_kernel_ctx can be observed from the test. */
static inline bool test_backend_is_sim(const char *backend)
{
    return strcmp(backend, "sim") == 0;
}

#endif
