/*
 * replay_main.c: runs a libFuzzer target's LLVMFuzzerTestOneInput over files,
 * without libFuzzer, so the committed corpora replay in every build (gcc
 * included) as ctest tests.
 *
 *     replay_<name> DIR|FILE...
 *
 * A directory's files run in name order (deterministic); a broken promise
 * aborts inside the target.  Exit 0 when every input ran, 1 when a path
 * could not be read or held no input.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Reads the whole file; NULL on failure. */
static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *grown = realloc(buf, cap *= 2);
            if (grown == NULL)
                free(buf);
            buf = grown;
        }
    }
    fclose(f);
    *size = n;
    return buf;
}

static int run_file(const char *path)
{
    size_t size;
    uint8_t *data = read_all(path, &size);
    if (data == NULL) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of dir in name order; the number run, or -1. */
static long run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **grown = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *names);
            if (grown == NULL)
                break;
            names = grown;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    long ran = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (names[i] != NULL && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(path) != 0)
                ran = -1;
            else if (ran >= 0)
                ran++;
        }
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv)
{
    long total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        long ran = -1;
        if (stat(argv[i], &st) == 0)
            ran = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]) == 0 ? 1 : -1;
        if (ran <= 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], ran < 0 ? "cannot read" : "no inputs");
            return 1;
        }
        total += ran;
    }
    printf("replay: %ld inputs ran, every promise held\n", total);
    return argc > 1 ? 0 : 1;
}
