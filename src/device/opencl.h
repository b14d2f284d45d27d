/*
 * opencl.h: what the OpenCL backend's files share (built only when the
 * build found CL/cl.h: HG_HAVE_OPENCL).
 *
 * libhostgraph has no link dependency on OpenCL: opencl_api.c loads
 * libOpenCL.so.1 (the ICD loader) with dlopen the first time an `opencl`
 * device is opened or listed, and every call goes through the table below.
 * Every native call goes through OCL_CALL, which turns a cl error into an
 * HG_E code and the message "clCreateBuffer: CL_MEM_OBJECT_ALLOCATION_FAILURE"
 * (IREE's status macro habit), kept per thread (opencl_errmsg).
 */
#ifndef HG_DEVICE_OPENCL_H
#define HG_DEVICE_OPENCL_H

#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>

#include "device/backend.h"

/* The OpenCL 1.2 calls the backend makes, resolved by dlsym. */
#define OCL_FUNCS(X)                                                                               \
    X(clGetPlatformIDs)                                                                            \
    X(clGetPlatformInfo)                                                                           \
    X(clGetDeviceIDs)                                                                              \
    X(clGetDeviceInfo)                                                                             \
    X(clCreateContext)                                                                             \
    X(clReleaseContext)                                                                            \
    X(clCreateCommandQueue)                                                                        \
    X(clReleaseCommandQueue)                                                                       \
    X(clCreateBuffer)                                                                              \
    X(clReleaseMemObject)                                                                          \
    X(clEnqueueWriteBuffer)                                                                        \
    X(clEnqueueReadBuffer)                                                                         \
    X(clEnqueueFillBuffer)                                                                         \
    X(clFinish)                                                                                    \
    X(clCreateProgramWithSource)                                                                   \
    X(clBuildProgram)                                                                              \
    X(clGetProgramBuildInfo)                                                                       \
    X(clReleaseProgram)                                                                            \
    X(clCreateKernel)                                                                              \
    X(clReleaseKernel)                                                                             \
    X(clSetKernelArg)                                                                              \
    X(clEnqueueNDRangeKernel)                                                                      \
    X(clEnqueueMarkerWithWaitList)                                                                 \
    X(clFlush)                                                                                     \
    X(clGetEventInfo)                                                                              \
    X(clGetEventProfilingInfo)                                                                     \
    X(clCreateUserEvent)                                                                           \
    X(clSetUserEventStatus)                                                                        \
    X(clWaitForEvents)                                                                             \
    X(clReleaseEvent)

typedef struct ocl_api {
#define OCL_FIELD(name) __typeof__(&name) name;
    OCL_FUNCS(OCL_FIELD)
#undef OCL_FIELD
} ocl_api;

/* The loaded table, or NULL with the reason in opencl_errmsg() (the library
 * named, or the symbol it lacks).  Loads once per process; never unloaded
 * (ICD loaders do not survive dlclose reliably). */
const ocl_api *opencl_api(void);

/* "CL_MEM_OBJECT_ALLOCATION_FAILURE"; "CL error -N" for codes it does not know. */
const char *opencl_error_name(cl_int rc);
/* 0 when rc is CL_SUCCESS; otherwise records "<what>: <CL name>" as this
 * thread's message and returns the HG code: HG_EDEVMEM for the
 * out-of-device-memory errors, HG_ENOMEM for out of host memory, else code. */
int opencl_check(cl_int rc, const char *what, int code);
/* The calling thread's last OpenCL backend message ("" if none). */
const char *opencl_errmsg(void);
/* Formats this thread's message and returns code. */
int opencl_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Calls api->fn(args...) and checks it (the one macro every call goes
 * through).  For calls that return the error in an out-param, pass it and
 * check with opencl_check directly. */
#define OCL_CALL(api, code, fn, ...) opencl_check((api)->fn(__VA_ARGS__), #fn, (code))

/* The device of platform p, device d (GPU, CPU or accelerator alike), or an
 * error naming what is missing (HG_ENOTFOUND). */
int opencl_pick(const ocl_api *api, uint32_t platform, uint32_t device, cl_device_id *out);

/* Writes one line per OpenCL device ("opencl:platform=P,device=D  name,
 * N CUs, global mem, max alloc, queue shape") to f; a line saying why when
 * there is none. */
void opencl_list(FILE *f);

#endif
