/*
 * outfile.h: writing a report file without ever losing the one that was
 * there.
 *
 * A regular file (or a path that does not exist yet) is written to a new
 * temporary file in the same directory and renamed over the target only when
 * every byte is written and fsync'd: a failure leaves the old file untouched
 * and no partial file.  A target that exists and is not a regular file (a
 * pipe, a device such as /dev/null, a terminal) is written directly and is
 * never removed; "-" means standard output.  The only path ever removed is
 * the temporary file this code created.  The replacement keeps the old
 * file's permission bits, and its owner and group where the process may set
 * them; a new file gets 0666 less the umask.
 *
 * Opening is the check: a report's path is opened before any work is done,
 * so a path that cannot be written is reported at once, with the OS error.
 */
#ifndef HG_BASE_OUTFILE_H
#define HG_BASE_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>

typedef struct outfile {
    FILE *f;        /* where to write; NULL when not open */
    char *target;   /* the path renamed over (a symlink's target), malloc'd */
    char *tmp;      /* the temporary file (regular targets), malloc'd; else NULL */
    bool is_stdout; /* "-": never closed here */
} outfile;

/* Opens `path` for a report.  Returns 0, or -1 with the reason (the OS
 * error, "is a directory") in why; nothing is left behind on failure. */
int outfile_open(outfile *of, const char *path, char *why, size_t whylen);
/* Finishes the file: flush, fsync and rename into place (regular targets),
 * or flush and close.  Returns 0, or -1 with the OS error in why; on failure
 * the temporary file is removed and the target is untouched (a non-regular
 * target may have taken part of the bytes).  of is closed either way. */
int outfile_commit(outfile *of, char *why, size_t whylen);
/* Closes without publishing: removes the temporary file, never the target.
 * A closed or zeroed outfile is a no-op. */
void outfile_abort(outfile *of);

#endif
