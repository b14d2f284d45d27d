/*
 * opencl_api.c: loading OpenCL at run time, its error names, picking and
 * listing devices.  Compiled only with HG_HAVE_OPENCL.
 *
 * Owns the process-wide function table (loaded once, under pthread_once,
 * never unloaded) and each thread's last backend message.  The library is
 * libOpenCL.so.1, the ICD loader every vendor's driver plugs into; the
 * environment variable HG_OPENCL_LIB names another file (tests use it to
 * check the message a machine without OpenCL gets).
 */
#ifdef HG_HAVE_OPENCL
#define _GNU_SOURCE /* RTLD_* under strict C11 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/opencl.h"

#define OCL_LIB_DEFAULT "libOpenCL.so.1"
#define OCL_MSG_MAX     512
/* cl_icd.h's "no ICD found" code (CL_PLATFORM_NOT_FOUND_KHR), not in cl.h. */
#define OCL_PLATFORM_NOT_FOUND_KHR (-1001)

static _Thread_local char ocl_msg[OCL_MSG_MAX];

static ocl_api ocl_table;
static const ocl_api *ocl_loaded;
static char ocl_load_error[OCL_MSG_MAX];
static pthread_once_t ocl_once = PTHREAD_ONCE_INIT;

const char *opencl_errmsg(void)
{
    return ocl_msg;
}

int opencl_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ocl_msg, sizeof ocl_msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *opencl_error_name(cl_int rc)
{
    switch (rc) {
#define N(c)                                                                                       \
    case c:                                                                                        \
        return #c;
        N(CL_SUCCESS)
        N(CL_DEVICE_NOT_FOUND)
        N(CL_DEVICE_NOT_AVAILABLE)
        N(CL_COMPILER_NOT_AVAILABLE)
        N(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        N(CL_OUT_OF_RESOURCES)
        N(CL_OUT_OF_HOST_MEMORY)
        N(CL_BUILD_PROGRAM_FAILURE)
        N(CL_MISALIGNED_SUB_BUFFER_OFFSET)
        N(CL_INVALID_VALUE)
        N(CL_INVALID_DEVICE_TYPE)
        N(CL_INVALID_PLATFORM)
        N(CL_INVALID_DEVICE)
        N(CL_INVALID_CONTEXT)
        N(CL_INVALID_COMMAND_QUEUE)
        N(CL_INVALID_HOST_PTR)
        N(CL_INVALID_MEM_OBJECT)
        N(CL_INVALID_BUFFER_SIZE)
        N(CL_INVALID_BINARY)
        N(CL_INVALID_BUILD_OPTIONS)
        N(CL_INVALID_PROGRAM)
        N(CL_INVALID_PROGRAM_EXECUTABLE)
        N(CL_INVALID_KERNEL_NAME)
        N(CL_INVALID_KERNEL_DEFINITION)
        N(CL_INVALID_KERNEL)
        N(CL_INVALID_ARG_INDEX)
        N(CL_INVALID_ARG_VALUE)
        N(CL_INVALID_ARG_SIZE)
        N(CL_INVALID_KERNEL_ARGS)
        N(CL_INVALID_WORK_DIMENSION)
        N(CL_INVALID_WORK_GROUP_SIZE)
        N(CL_INVALID_GLOBAL_WORK_SIZE)
        N(CL_INVALID_EVENT_WAIT_LIST)
        N(CL_INVALID_OPERATION)
        N(OCL_PLATFORM_NOT_FOUND_KHR)
#undef N
    default:
        return NULL;
    }
}

int opencl_check(cl_int rc, const char *what, int code)
{
    if (rc == CL_SUCCESS)
        return 0;
    const char *name = opencl_error_name(rc);
    if (name != NULL)
        opencl_fail(0, "%s: %s", what, name);
    else
        opencl_fail(0, "%s: CL error %d", what, (int)rc);
    if (rc == CL_MEM_OBJECT_ALLOCATION_FAILURE || rc == CL_OUT_OF_RESOURCES ||
        rc == CL_INVALID_BUFFER_SIZE)
        return HG_EDEVMEM;
    if (rc == CL_OUT_OF_HOST_MEMORY)
        return HG_ENOMEM;
    return code;
}

static void ocl_load(void)
{
    const char *lib = getenv("HG_OPENCL_LIB");
    if (lib == NULL || *lib == '\0')
        lib = OCL_LIB_DEFAULT;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(ocl_load_error, sizeof ocl_load_error,
                 "cannot load %s: install an OpenCL ICD loader and driver (Debian: "
                 "ocl-icd-libopencl1 pocl-opencl-icd)",
                 lib);
        return;
    }
#define OCL_SYM(name)                                                                              \
    *(void **)&ocl_table.name = dlsym(h, #name);                                                   \
    if (ocl_table.name == NULL) {                                                                  \
        snprintf(ocl_load_error, sizeof ocl_load_error, "%s has no symbol %s", lib, #name);        \
        return;                                                                                    \
    }
    OCL_FUNCS(OCL_SYM)
#undef OCL_SYM
    ocl_loaded = &ocl_table;
}

const ocl_api *opencl_api(void)
{
    pthread_once(&ocl_once, ocl_load);
    if (ocl_loaded == NULL)
        opencl_fail(0, "%s", ocl_load_error);
    return ocl_loaded;
}

/* The platforms there are: up to max into ids, their number into *n. */
static int ocl_platforms(const ocl_api *api, cl_platform_id *ids, cl_uint max, cl_uint *n)
{
    cl_int rc = api->clGetPlatformIDs(max, ids, n);
    if (rc == OCL_PLATFORM_NOT_FOUND_KHR || (rc == CL_SUCCESS && *n == 0)) {
        *n = 0;
        return opencl_fail(HG_ENOTFOUND, "no OpenCL platform (clGetPlatformIDs found none)");
    }
    if (*n > max)
        *n = max;
    return opencl_check(rc, "clGetPlatformIDs", HG_ENOTFOUND);
}

#define OCL_MAX_IDS 64u

int opencl_pick(const ocl_api *api, uint32_t platform, uint32_t device, cl_device_id *out)
{
    cl_platform_id plats[OCL_MAX_IDS];
    cl_uint np = 0, nd = 0;
    int rc = ocl_platforms(api, plats, OCL_MAX_IDS, &np);
    if (rc != 0)
        return rc;
    if (platform >= np)
        return opencl_fail(HG_ENOTFOUND, "platform=%u: this machine has %u OpenCL platform(s)",
                           platform, np);
    cl_device_id devs[OCL_MAX_IDS];
    cl_int crc = api->clGetDeviceIDs(plats[platform], CL_DEVICE_TYPE_ALL, OCL_MAX_IDS, devs, &nd);
    if (crc == CL_DEVICE_NOT_FOUND)
        nd = 0;
    else if ((rc = opencl_check(crc, "clGetDeviceIDs", HG_ENOTFOUND)) != 0)
        return rc;
    if (device >= nd || device >= OCL_MAX_IDS)
        return opencl_fail(HG_ENOTFOUND, "device=%u: OpenCL platform %u has %u device(s)", device,
                           platform, nd);
    *out = devs[device];
    return 0;
}

/* One listing line for the device. */
static void ocl_list_device(const ocl_api *api, FILE *f, cl_uint p, cl_uint d, cl_device_id id)
{
    char name[128] = "?";
    cl_uint cus = 0;
    cl_ulong global = 0, max_alloc = 0;
    api->clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof name, name, NULL);
    name[sizeof name - 1] = '\0';
    api->clGetDeviceInfo(id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, NULL);
    api->clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL);
    api->clGetDeviceInfo(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
    cl_command_queue_properties props = 0;
    api->clGetDeviceInfo(id, CL_DEVICE_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    fprintf(
        f,
        "opencl:platform=%u,device=%u  %s: %u compute units, memory %llu MiB, "
        "max allocation %llu MiB, %s\n",
        p, d, name, cus, (unsigned long long)(global >> 20), (unsigned long long)(max_alloc >> 20),
        props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE ? "out-of-order queue" : "in-order queues");
}

void opencl_list(FILE *f)
{
    const ocl_api *api = opencl_api();
    cl_platform_id plats[OCL_MAX_IDS];
    cl_uint np = 0;
    if (api == NULL || ocl_platforms(api, plats, OCL_MAX_IDS, &np) != 0) {
        fprintf(f, "opencl: none (%s)\n", opencl_errmsg());
        return;
    }
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devs[OCL_MAX_IDS];
        cl_uint nd = 0;
        if (api->clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, OCL_MAX_IDS, devs, &nd) != CL_SUCCESS)
            nd = 0;
        for (cl_uint d = 0; d < nd && d < OCL_MAX_IDS; d++)
            ocl_list_device(api, f, p, d, devs[d]);
    }
}
#else
/* Without CL/cl.h at build time there is no OpenCL backend (spec.c says so). */
typedef int hg_no_opencl_api;
#endif
