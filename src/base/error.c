/*
 * error.c: HG_E* names, the hg_err message carrier, and each thread's last
 * error message (hg_last_errmsg): thread-local, so two threads' failures
 * never overwrite each other's message.
 */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>

const char *hg_strerror(int code)
{
    switch (code) {
    case HG_OK:
        return "success";
    case HG_EINVAL:
        return "invalid argument";
    case HG_EOVERFLOW:
        return "size overflow";
    case HG_ELIMIT:
        return "limit exceeded";
    case HG_ENOMEM:
        return "out of host memory";
    case HG_EDEVMEM:
        return "out of device memory";
    case HG_ECOPY:
        return "device copy failed";
    case HG_EKERNEL:
        return "kernel failed";
    case HG_ENOHOSTVIEW:
        return "arg has no host view";
    case HG_ERANGE:
        return "out of range";
    case HG_ENOTFOUND:
        return "not found";
    case HG_EIO:
        return "I/O error";
    case HG_ESTALE:
        return "stale data";
    case HG_EUNSUPPORTED:
        return "unsupported by the device";
    case HG_ECANCELED:
        return "canceled";
    default:
        return "unknown error";
    }
}

void err_clear(hg_err *e)
{
    if (e == NULL)
        return;
    e->code = 0;
    e->msg[0] = '\0';
}

int err_set(hg_err *e, int code, const char *fmt, ...)
{
    if (e == NULL)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->code = code;
    return code;
}

static _Thread_local char last_msg[HG_ERR_MSG_MAX];

int err_last_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    return code;
}

void err_last_clear(void)
{
    last_msg[0] = '\0';
}

const char *hg_last_errmsg(void)
{
    return last_msg;
}
