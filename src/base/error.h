/*
 * error.h: the detailed-error carrier passed down the stages of a run.
 *
 * Stages return HG_E* codes and write one line into an hg_err naming the arg
 * and the value; the runner keeps the line as its last error message.
 */
#ifndef HG_BASE_ERROR_H
#define HG_BASE_ERROR_H

#include "hostgraph.h"

#define HG_ERR_MSG_MAX 512

typedef struct hg_err {
    int code;
    char msg[HG_ERR_MSG_MAX];
} hg_err;

/* Clears e (code 0, empty message). */
void err_clear(hg_err *e);
/* Formats the message into e (which may be NULL) and returns `code`, so a
 * failing path reads `return err_set(e, HG_ERANGE, "arg '%s': ...", ...)`. */
int err_set(hg_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The calling thread's last error (hg_last_errmsg), for calls that have no
 * runner to carry a message.  err_last_set formats it and returns `code`;
 * err_last_clear empties it (those calls' success). */
int err_last_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void err_last_clear(void);

#endif
