/*
 * opencl_prog.c: programs and kernels on the OpenCL device.
 * Compiled only with HG_HAVE_OPENCL.
 *
 * Programs.  A kernel record's OpenCL slot is program source text and an
 * entry-point name.  The device builds each distinct source text once, with
 * OCL_PREAMBLE (the calling convention's helpers, hostgraph.h) in front, and
 * keeps it until close: the cache is keyed by the text's content (FNV-1a
 * hash, then the bytes), and holds its own copy, so the caller's text need
 * live only until submit.  Each (program, entry) gets one cl_kernel.  A
 * build error is HG_EINVAL with the first lines of the compiler's log.
 * PoCL also keeps compiled binaries on disk (POCL_CACHE_DIR: the tests
 * point it at the build tree, writable), so even a first build in a later
 * process is a cache hit there; `builds` counts the programs this device
 * built (device_debug_program_builds), so a test sees a later round build
 * nothing.
 *
 * The compiler's chatter.  PoCL's clang writes its diagnostics into the
 * build log, but a cold cache also has it print "104 warnings generated." on
 * the process's stderr, under a `--quiet` run, where nothing can take it
 * back.  So programs build with -w (no warnings, hence no such line); the
 * log of a failed build still carries its errors.  With HG_OPENCL_BUILD_LOG=1
 * in the environment (`hostgraph -v` sets it) they build without -w and each
 * build's log goes to stderr, one "hostgraph: OpenCL build ..." line first.
 * Redirecting fd 2 around clBuildProgram instead was considered and left:
 * fd 2 is the whole process's, so a build would swallow every other
 * thread's stderr for its seconds (a progress line, a Ctrl-C's
 * acknowledgement, another runner's error).
 */
#ifdef HG_HAVE_OPENCL
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/opencl_dev.h"

/* Lines of a failed build's log that go into the message. */
#define OCL_LOG_LINES 6

/* What every program is built with, in front of its own text. */
static const char OCL_PREAMBLE[] =
    "typedef struct hg_view { ulong offset; uint ndims; uint pad_; ulong shape[5];"
    " ulong strides[5]; } hg_view;\n"
    "#define HG_STATUS_ARGS __global int *hg_status, uint hg_task\n"
    "#define HG_FAIL(code) (hg_status[hg_task] = (code))\n"
    "#define HG_TENSOR(T, name) __global T *name, hg_view name##_v\n"
    "#define HG_PTR(name) (name + name##_v.offset)\n"
    "inline float hg_bf16_to_f32(ushort b) { return as_float((uint)b << 16); }\n"
    "inline ushort hg_f32_to_bf16(float f) { uint u = as_uint(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);\n"
    "  u += 0x7fffu + ((u >> 16) & 1u); return (ushort)(u >> 16); }\n"
    "#line 1\n";

struct ocl_program {
    ocl_program *next;
    uint64_t hash;
    size_t len;
    char *source; /* the device's own copy */
    cl_program program;
    ocl_kernel *kernels;
};

static uint64_t ocl_hash(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

void opencl_programs_free(ocl_dev *s)
{
    while (s->programs != NULL) {
        ocl_program *p = s->programs;
        s->programs = p->next;
        while (p->kernels != NULL) {
            ocl_kernel *k = p->kernels;
            p->kernels = k->next;
            s->api->clReleaseKernel(k->kernel);
            free(k->entry);
            free(k);
        }
        s->api->clReleaseProgram(p->program);
        free(p->source);
        free(p);
    }
}

uint64_t opencl_program_builds(void *state)
{
    ocl_dev *s = state;
    return opencl_read_locked(&s->prog_lock, &s->builds);
}

/* The program's whole build log (malloc'd, NUL-terminated), or NULL.  The
 * whole log: asked for into a smaller buffer, OpenCL returns
 * CL_INVALID_VALUE and writes nothing, which would leave a message empty
 * exactly when the log is long. */
static char *ocl_build_log(ocl_dev *s, cl_program prog)
{
    size_t len = 0;
    s->api->clGetProgramBuildInfo(prog, s->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &len);
    char *log = len > 0 ? calloc(1, len + 1) : NULL;
    if (log != NULL && s->api->clGetProgramBuildInfo(prog, s->id, CL_PROGRAM_BUILD_LOG, len, log,
                                                     NULL) != CL_SUCCESS) {
        free(log);
        log = NULL;
    }
    return log;
}

/* The first OCL_LOG_LINES lines of the build log into e. */
static int ocl_build_error(ocl_dev *s, cl_program prog, const char *entry, hg_err *e)
{
    char *log = ocl_build_log(s, prog), *p = log;
    for (int line = 0; line < OCL_LOG_LINES && p != NULL && *p != '\0'; line++) {
        p = strchr(p, '\n');
        if (p != NULL)
            *p++ = ' ';
        if (line == OCL_LOG_LINES - 1 && p != NULL)
            *p = '\0';
    }
    int rc = err_set(e, HG_EINVAL, "OpenCL program of kernel entry '%s' does not build: %s", entry,
                     log != NULL && *log != '\0' ? log : "(no build log)");
    free(log);
    return rc;
}

/* The command's -v (device_build_log_on): a flag, not a setenv, so that a
 * call in one thread never writes the environment another thread reads. */
static atomic_bool build_log_forced;

void device_build_log_on(void)
{
    atomic_store(&build_log_forced, true);
}

/* True after device_build_log_on or when HG_OPENCL_BUILD_LOG=1: builds
 * keep their warnings and print their logs. */
static bool ocl_build_log_wanted(void)
{
    if (atomic_load(&build_log_forced))
        return true;
    const char *v = getenv("HG_OPENCL_BUILD_LOG");
    return v != NULL && strcmp(v, "1") == 0;
}

/* HG_OPENCL_BUILD_LOG=1: the log of a build that succeeded, on stderr. */
static void ocl_print_build_log(ocl_dev *s, cl_program prog, const char *entry)
{
    char *log = ocl_build_log(s, prog);
    size_t len = log != NULL ? strlen(log) : 0;
    bool empty = log == NULL || strspn(log, " \t\r\n") == len;
    fprintf(stderr, "hostgraph: OpenCL build of the program of kernel entry '%s': %s%s%s", entry,
            empty ? "an empty log" : "log:\n", empty ? "" : log,
            empty || log[len - 1] != '\n' ? "\n" : "");
    free(log);
}

/* Builds a copy of source[0..len) (prog_lock held). */
static int ocl_build(ocl_dev *s, const char *source, size_t len, uint64_t hash, const char *entry,
                     ocl_program **out, hg_err *e)
{
    ocl_program *p = calloc(1, sizeof *p);
    char *copy = malloc(len + 1);
    if (p == NULL || copy == NULL) {
        free(p);
        free(copy);
        return err_set(e, HG_ENOMEM, "OpenCL program of %zu bytes: out of host memory", len);
    }
    memcpy(copy, source, len + 1);
    const char *parts[2] = {OCL_PREAMBLE, copy};
    cl_int crc = CL_SUCCESS;
    p->program = s->api->clCreateProgramWithSource(s->ctx, 2, parts, NULL, &crc);
    int rc = opencl_check(crc, "clCreateProgramWithSource", HG_EINVAL);
    if (rc == 0) {
        const bool log = ocl_build_log_wanted();
        crc = s->api->clBuildProgram(p->program, 1, &s->id,
                                     log ? "-cl-std=CL1.2" : "-cl-std=CL1.2 -w", NULL, NULL);
        if (crc == CL_SUCCESS && log)
            ocl_print_build_log(s, p->program, entry);
        if (crc == CL_BUILD_PROGRAM_FAILURE)
            rc = ocl_build_error(s, p->program, entry, e);
        else if ((rc = opencl_check(crc, "clBuildProgram", HG_EINVAL)) != 0)
            err_set(e, rc, "%s", opencl_errmsg());
    } else {
        err_set(e, rc, "%s", opencl_errmsg());
    }
    if (rc != 0) {
        if (p->program != NULL)
            s->api->clReleaseProgram(p->program);
        free(copy);
        free(p);
        return rc;
    }
    p->source = copy;
    p->len = len;
    p->hash = hash;
    p->next = s->programs;
    s->programs = p;
    s->builds++;
    *out = p;
    return 0;
}

/* The program for source (built now if new; prog_lock held). */
static int ocl_program_get(ocl_dev *s, const char *source, const char *entry, ocl_program **out,
                           hg_err *e)
{
    size_t len = strlen(source);
    uint64_t hash = ocl_hash(source, len);
    for (ocl_program *p = s->programs; p != NULL; p = p->next) {
        if (p->hash == hash && p->len == len && memcmp(p->source, source, len) == 0) {
            *out = p;
            return 0;
        }
    }
    return ocl_build(s, source, len, hash, entry, out, e);
}

/* The cl_kernel for entry in p (made now if new; prog_lock held). */
static int ocl_kernel_of(ocl_dev *s, ocl_program *p, const char *entry, ocl_kernel **out, hg_err *e)
{
    for (ocl_kernel *k = p->kernels; k != NULL; k = k->next) {
        if (strcmp(k->entry, entry) == 0) {
            *out = k;
            return 0;
        }
    }
    ocl_kernel *k = calloc(1, sizeof *k);
    char *name = strdup(entry);
    if (k == NULL || name == NULL) {
        free(k);
        free(name);
        return err_set(e, HG_ENOMEM, "OpenCL kernel '%s': out of host memory", entry);
    }
    cl_int crc = CL_SUCCESS;
    k->kernel = s->api->clCreateKernel(p->program, entry, &crc);
    int rc = opencl_check(crc, "clCreateKernel", HG_EINVAL);
    if (rc != 0) {
        free(k);
        free(name);
        return err_set(e, rc, "OpenCL entry point '%s': %s", entry, opencl_errmsg());
    }
    k->entry = name;
    k->next = p->kernels;
    p->kernels = k;
    *out = k;
    return 0;
}

int opencl_kernel_get(void *state, const char *source, const char *entry, const void **handle,
                      hg_err *e)
{
    ocl_dev *s = state;
    ocl_program *p = NULL;
    ocl_kernel *k = NULL;
    pthread_mutex_lock(&s->prog_lock);
    int rc = ocl_program_get(s, source, entry, &p, e);
    if (rc == 0)
        rc = ocl_kernel_of(s, p, entry, &k, e);
    pthread_mutex_unlock(&s->prog_lock);
    if (rc == 0)
        *handle = k;
    return rc;
}

#else
typedef int hg_no_opencl_prog;
#endif
