/*
 * outfile.c: report files written to a temporary file and renamed into
 * place (outfile.h says why).
 *
 * The temporary file is created with O_EXCL under a name no other file has
 * (".NAME.PID-N.tmp" beside the target), so it is ours to remove; the target
 * itself is never removed or truncated unless it is a non-regular file the
 * user named (a pipe or a device, written as such).
 *
 * A replaced file keeps what its owner set: the temporary file takes the
 * target's permission bits and, where the process may (root, or a group the
 * user is in), its owner and group, before a byte is written, so a 0600
 * report is never readable by others, not even while it is being written.
 * A new file gets 0666 less the umask, as any file the user creates.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "base/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int why_errno(char *why, size_t whylen, const char *what, int err)
{
    snprintf(why, whylen, "%s%s%s", what, *what ? ": " : "", strerror(err));
    return -1;
}

/* Gives the temporary file the replaced file's owner (where permitted:
 * chown needs privilege, chgrp a group of ours) and mode; the owner first,
 * as a chown clears set-id bits. */
static int keep_owner_and_mode(int fd, const struct stat *old)
{
    if (fchown(fd, old->st_uid, old->st_gid) != 0 && fchown(fd, (uid_t)-1, old->st_gid) != 0 &&
        errno != EPERM)
        return -1;
    return fchmod(fd, old->st_mode & 07777);
}

/* Opens a new file beside target under a name nobody else uses; old is the
 * regular file it will replace, or NULL. */
static int open_tmp(outfile *of, const struct stat *old, char *why, size_t whylen)
{
    static atomic_uint serial;
    const char *slash = strrchr(of->target, '/');
    size_t dirlen = slash != NULL ? (size_t)(slash - of->target) + 1 : 0;
    size_t len = strlen(of->target) + 64;
    of->tmp = malloc(len);
    if (of->tmp == NULL)
        return why_errno(why, whylen, "", ENOMEM);
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned n = atomic_fetch_add(&serial, 1);
        snprintf(of->tmp, len, "%.*s.%s.%ld-%u.tmp", (int)dirlen, of->target, of->target + dirlen,
                 (long)getpid(), n);
        /* Owner-only until it has the old file's mode. */
        int fd = open(of->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, old != NULL ? 0600 : 0666);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0)
            break;
        of->f = old == NULL || keep_owner_and_mode(fd, old) == 0 ? fdopen(fd, "w") : NULL;
        if (of->f != NULL)
            return 0;
        int err = errno;
        close(fd);
        unlink(of->tmp);
        errno = err;
        break;
    }
    int err = errno;
    free(of->tmp);
    of->tmp = NULL;
    return why_errno(why, whylen, "", err);
}

int outfile_open(outfile *of, const char *path, char *why, size_t whylen)
{
    struct stat st;
    memset(of, 0, sizeof *of);
    if (path == NULL || *path == '\0')
        return why_errno(why, whylen, "", ENOENT);
    if (strcmp(path, "-") == 0) {
        of->f = stdout;
        of->is_stdout = true;
        return 0;
    }
    /* A symlink is followed: the file it names is replaced, the link kept. */
    of->target = realpath(path, NULL);
    if (of->target == NULL && errno != ENOENT)
        return why_errno(why, whylen, "", errno);
    if (of->target == NULL && (of->target = strdup(path)) == NULL)
        return why_errno(why, whylen, "", ENOMEM);
    int err = 0;
    bool exists = stat(of->target, &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) {
        /* A pipe or a device is written as it is; a directory cannot be. */
        of->f = S_ISDIR(st.st_mode) ? NULL : fopen(of->target, "w");
        err = S_ISDIR(st.st_mode) ? EISDIR : errno;
        if (of->f != NULL)
            return 0;
    } else if (open_tmp(of, exists ? &st : NULL, why, whylen) == 0) {
        return 0;
    } else {
        err = -1; /* open_tmp said why */
    }
    free(of->target);
    of->target = NULL;
    return err < 0 ? -1 : why_errno(why, whylen, "", err);
}

int outfile_commit(outfile *of, char *why, size_t whylen)
{
    int err = 0;
    if (of->f == NULL)
        return why_errno(why, whylen, "", EBADF);
    errno = 0;
    if (fflush(of->f) != 0 || ferror(of->f))
        err = errno != 0 ? errno : EIO;
    if (err == 0 && of->tmp != NULL && fsync(fileno(of->f)) != 0)
        err = errno;
    if (!of->is_stdout && fclose(of->f) != 0 && err == 0)
        err = errno != 0 ? errno : EIO;
    of->f = NULL;
    if (err == 0 && of->tmp != NULL && rename(of->tmp, of->target) != 0)
        err = errno;
    if (err != 0 && of->tmp != NULL)
        unlink(of->tmp);
    free(of->tmp);
    free(of->target);
    of->tmp = of->target = NULL;
    return err == 0 ? 0 : why_errno(why, whylen, "", err);
}

void outfile_abort(outfile *of)
{
    if (of->f != NULL && !of->is_stdout)
        fclose(of->f);
    if (of->tmp != NULL)
        unlink(of->tmp);
    free(of->tmp);
    free(of->target);
    memset(of, 0, sizeof *of);
}
