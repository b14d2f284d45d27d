/*
 * test_device.h: opening a device in a test, with the spec error printed
 * when it fails (the test then fails on its ASSERT of a non-NULL device).
 */
#ifndef HG_TEST_DEVICE_H
#define HG_TEST_DEVICE_H

#include <stdio.h>

#include "hostgraph.h"

static inline hg_device *test_device_open(const char *spec)
{
    hg_device *dev = NULL;
    char msg[256] = "";
    if (hg_device_open(spec, &dev, msg, sizeof msg) != 0)
        fprintf(stderr, "  open '%s': %s\n", spec, msg);
    return dev;
}

#endif
