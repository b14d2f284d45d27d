/*
 * opencl_run.c: programs, kernels and runs on the OpenCL device.
 * Compiled only with HG_HAVE_OPENCL.
 *
 * Programs.  A kernel record's OpenCL slot is program source text and an
 * entry-point name.  The device builds each distinct source text once, with
 * OCL_PREAMBLE (the calling convention's helpers, hostgraph.h) in front, and
 * keeps it until close: the cache is keyed by the text's content (FNV-1a
 * hash, then the bytes), and holds its own copy, so the caller's text need
 * live only until submit.  Each (program, entry) gets one cl_kernel.  A
 * build error is HG_EINVAL with the first lines of the compiler's log.
 * PoCL also keeps compiled binaries on disk (POCL_CACHE_DIR).
 *
 * Runs.  queue_begin takes run_lock (a cl_kernel's args are per kernel
 * object, so two runs must not set them at once) and the table's read lock
 * (a concurrent free waits for the run), and zeroes one status word per
 * task; each launch sets the args and enqueues an NDRange on the in-order
 * queue; queue_end waits once (clFinish), reads the status words back and
 * releases both locks.  The status buffer and its host copy belong to the
 * device, grow geometrically, and their transfers are not counted: they are
 * the runtime's, not the run's.
 */
#ifdef HG_HAVE_OPENCL
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

/* The kernel's view of one tensor arg; OCL_PREAMBLE's hg_view, field for
 * field (8-byte fields, so host and device lay it out alike). */
typedef struct ocl_view {
    cl_ulong offset; /* elements from the cl_mem's start */
    cl_uint ndims, pad;
    cl_ulong shape[HG_MAX_DIMS];
    cl_ulong strides[HG_MAX_DIMS];
} ocl_view;

typedef struct ocl_kernel {
    struct ocl_kernel *next;
    char *entry;
    cl_kernel kernel;
} ocl_kernel;

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
    if (s->status != NULL)
        s->api->clReleaseMemObject(s->status);
    free(s->status_host);
    s->status = NULL;
    s->status_host = NULL;
}

uint64_t opencl_program_builds(void *state)
{
    ocl_dev *s = state;
    pthread_mutex_lock(&s->prog_lock);
    uint64_t n = s->builds;
    pthread_mutex_unlock(&s->prog_lock);
    return n;
}

/* The first OCL_LOG_LINES lines of the build log into e. */
static int ocl_build_error(ocl_dev *s, cl_program prog, const char *entry, hg_err *e)
{
    char log[HG_ERR_MSG_MAX] = "";
    size_t len = 0;
    s->api->clGetProgramBuildInfo(prog, s->id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, &len);
    log[sizeof log - 1] = '\0';
    char *p = log;
    for (int line = 0; line < OCL_LOG_LINES && p != NULL; line++) {
        p = strchr(p, '\n');
        if (p != NULL)
            *p++ = ' ';
        if (line == OCL_LOG_LINES - 1 && p != NULL)
            *p = '\0';
    }
    return err_set(e, HG_EINVAL, "OpenCL program of kernel entry '%s' does not build: %s", entry,
                   log);
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
        crc = s->api->clBuildProgram(p->program, 1, &s->id, "-cl-std=CL1.2", NULL, NULL);
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

/* ---------------------------------------------------------------- runs */

/* Room for ntasks status words (run_lock held): grown geometrically. */
static int ocl_status_reserve(ocl_dev *s, uint32_t ntasks, hg_err *e)
{
    if (ntasks <= s->status_cap)
        return 0;
    uint32_t cap = s->status_cap * 2 > ntasks ? s->status_cap * 2 : ntasks;
    cl_int *host = realloc(s->status_host, (size_t)cap * sizeof *host);
    if (host == NULL)
        return err_set(e, HG_ENOMEM, "status words for %u tasks", cap);
    s->status_host = host;
    if (s->status != NULL)
        s->api->clReleaseMemObject(s->status);
    cl_int crc = CL_SUCCESS;
    s->status =
        s->api->clCreateBuffer(s->ctx, CL_MEM_READ_WRITE, (size_t)cap * sizeof(cl_int), NULL, &crc);
    int rc = opencl_check(crc, "clCreateBuffer", HG_EDEVMEM);
    s->status_cap = rc == 0 ? cap : 0;
    if (rc != 0)
        s->status = NULL;
    return rc == 0 ? 0 : err_set(e, rc, "status words for %u tasks: %s", cap, opencl_errmsg());
}

int opencl_queue_begin(void *state, uint32_t ntasks, hg_err *e)
{
    ocl_dev *s = state;
    pthread_mutex_lock(&s->run_lock);
    device_rwlock_rdlock(&s->table_lock);
    int rc = ocl_status_reserve(s, ntasks, e);
    cl_int zero = 0;
    if (rc == 0 && ntasks > 0) {
        rc = OCL_CALL(s->api, HG_EKERNEL, clEnqueueFillBuffer, s->queue, s->status, &zero,
                      sizeof zero, 0, (size_t)ntasks * sizeof zero, 0, NULL, NULL);
        if (rc != 0)
            err_set(e, rc, "%s", opencl_errmsg());
    }
    return rc; /* queue_end releases the locks, whatever happened */
}

/* Sets arg `*at` and the next (buffer, view) for one tensor arg. */
static int ocl_set_tensor(ocl_dev *s, cl_kernel k, cl_uint *at, const device_karg *a, uint32_t i,
                          hg_err *e)
{
    ocl_view v = {.ndims = a->ndims};
    cl_mem mem = NULL;
    size_t esize = hg_dtype_size(a->dtype);
    for (uint32_t d = 0; d < HG_MAX_DIMS; d++) {
        v.shape[d] = a->shape[d];
        v.strides[d] = a->strides[d];
    }
    if (a->addr != 0) {
        const ocl_alloc *al = opencl_lookup(s, a->addr, 0);
        if (al == NULL || esize == 0 || (a->addr - al->addr) % esize != 0)
            return err_set(e, HG_ERANGE, "arg %u at 0x%llx is not in live device memory", i,
                           (unsigned long long)a->addr);
        mem = al->mem;
        v.offset = (a->addr - al->addr) / esize;
    }
    int rc = OCL_CALL(s->api, HG_EINVAL, clSetKernelArg, k, (*at)++, sizeof mem, &mem);
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_EINVAL, clSetKernelArg, k, (*at)++, sizeof v, &v);
    return rc == 0 ? 0 : err_set(e, rc, "arg %u: %s", i, opencl_errmsg());
}

/* Work items: the elements of the first arg the task writes (1 if none). */
static size_t ocl_work_items(const device_karg *args, uint32_t nargs)
{
    for (uint32_t i = 0; i < nargs; i++) {
        if (!args[i].write)
            continue;
        size_t n = 1;
        for (uint32_t d = 0; d < args[i].ndims; d++)
            n *= args[i].shape[d];
        return n;
    }
    return 1;
}

int opencl_launch(void *state, const void *handle, uint32_t task, const device_karg *args,
                  uint32_t nargs, const uint64_t *scalars, uint32_t nscalars, hg_err *e)
{
    ocl_dev *s = state;
    cl_kernel k = ((const ocl_kernel *)handle)->kernel;
    cl_uint at = 0, t = task;
    int rc = OCL_CALL(s->api, HG_EINVAL, clSetKernelArg, k, at++, sizeof s->status, &s->status);
    if (rc == 0)
        rc = OCL_CALL(s->api, HG_EINVAL, clSetKernelArg, k, at++, sizeof t, &t);
    if (rc != 0)
        return err_set(e, rc, "%s", opencl_errmsg());
    for (uint32_t i = 0; i < nargs && rc == 0; i++)
        rc = ocl_set_tensor(s, k, &at, &args[i], i, e);
    for (uint32_t i = 0; i < nscalars && rc == 0; i++) {
        cl_ulong v = scalars[i];
        rc = OCL_CALL(s->api, HG_EINVAL, clSetKernelArg, k, at++, sizeof v, &v);
        if (rc != 0)
            err_set(e, rc, "scalar %u: %s", i, opencl_errmsg());
    }
    size_t work = ocl_work_items(args, nargs);
    if (rc != 0 || work == 0)
        return rc;
    rc = OCL_CALL(s->api, HG_EKERNEL, clEnqueueNDRangeKernel, s->queue, k, 1, NULL, &work, NULL, 0,
                  NULL, NULL);
    return rc == 0 ? 0 : err_set(e, rc, "%s", opencl_errmsg());
}

int opencl_queue_end(void *state, uint32_t ntasks, uint32_t *bad_task, int32_t *bad_code, hg_err *e)
{
    ocl_dev *s = state;
    *bad_task = UINT32_MAX;
    *bad_code = 0;
    int rc = 0;
    if (ntasks > 0 && s->status != NULL)
        rc = OCL_CALL(s->api, HG_EKERNEL, clEnqueueReadBuffer, s->queue, s->status, CL_TRUE, 0,
                      (size_t)ntasks * sizeof(cl_int), s->status_host, 0, NULL, NULL);
    int frc = OCL_CALL(s->api, HG_EKERNEL, clFinish, s->queue);
    if (rc == 0 && frc != 0)
        rc = frc;
    if (rc != 0)
        err_set(e, rc, "%s", opencl_errmsg());
    for (uint32_t t = 0; rc == 0 && t < ntasks && s->status_host != NULL; t++) {
        if (s->status_host[t] != 0) {
            *bad_task = t;
            *bad_code = s->status_host[t];
            break;
        }
    }
    device_rwlock_unlock(&s->table_lock);
    pthread_mutex_unlock(&s->run_lock);
    return rc;
}
#else
typedef int hg_no_opencl_run;
#endif
