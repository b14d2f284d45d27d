/*
 * abi_probe.c: the C layout of every struct the Python bindings declare
 * (python/hostgraph/_capi.py), as the compiler sees the public headers.
 * test_abi.py compares it with the ctypes declarations, so a header change
 * the bindings miss fails a test instead of corrupting memory.
 */
#include <stddef.h>

#include "hostgraph.h"
#include "hostgraph_scenes.h"

typedef struct hg_abi_field {
    const char *type;  /* the struct */
    const char *field; /* NULL: the struct's own size */
    size_t offset, size;
} hg_abi_field;

#define SIZE(T)                                                                                    \
    {                                                                                              \
#T, NULL, 0, sizeof(T)                                                                     \
    }
#define FIELD(T, f)                                                                                \
    {                                                                                              \
#T, #f, offsetof(T, f), sizeof(((T *)0)->f)                                                \
    }

__attribute__((visibility("default"))) const hg_abi_field hg_abi_fields[] = {
    SIZE(hg_tensor),
    FIELD(hg_tensor, dtype),
    FIELD(hg_tensor, ndims),
    FIELD(hg_tensor, shape),
    FIELD(hg_tensor, strides),
    FIELD(hg_tensor, offset),
    FIELD(hg_tensor, host),
    FIELD(hg_tensor, device),
    SIZE(hg_arg),
    FIELD(hg_arg, name),
    FIELD(hg_arg, dir),
    FIELD(hg_arg, tensor),
    FIELD(hg_arg, scalar),
    FIELD(hg_arg, residency),
    SIZE(hg_callable),
    FIELD(hg_callable, name),
    FIELD(hg_callable, orchestrate),
    FIELD(hg_callable, user),
    SIZE(hg_run_stats),
    FIELD(hg_run_stats, wall_ns),
    FIELD(hg_run_stats, bind_ns),
    FIELD(hg_run_stats, orch_ns),
    FIELD(hg_run_stats, exec_ns),
    FIELD(hg_run_stats, copyback_ns),
    FIELD(hg_run_stats, release_ns),
    FIELD(hg_run_stats, h2d_bytes),
    FIELD(hg_run_stats, d2h_bytes),
    FIELD(hg_run_stats, h2d_copies),
    FIELD(hg_run_stats, d2h_copies),
    FIELD(hg_run_stats, h2d_batches),
    FIELD(hg_run_stats, d2h_batches),
    FIELD(hg_run_stats, device_allocs),
    FIELD(hg_run_stats, tasks),
    FIELD(hg_run_stats, edges),
    FIELD(hg_run_stats, retained_bytes),
    FIELD(hg_run_stats, resident_hits),
    FIELD(hg_run_stats, resident_bytes_skipped),
    FIELD(hg_run_stats, stale_uploads),
    FIELD(hg_run_stats, resident_staged),
    FIELD(hg_run_stats, evictions),
    FIELD(hg_run_stats, h2d_bytes_skipped),
    FIELD(hg_run_stats, d2h_bytes_skipped),
    FIELD(hg_run_stats, h2d_ns),
    FIELD(hg_run_stats, d2h_ns),
    FIELD(hg_run_stats, replayed),
    FIELD(hg_run_stats, net_bytes),
    FIELD(hg_run_stats, net_ns),
    FIELD(hg_run_stats, build_ns),
    SIZE(hg_device_counters),
    FIELD(hg_device_counters, h2d_bytes),
    FIELD(hg_device_counters, d2h_bytes),
    FIELD(hg_device_counters, h2d_copies),
    FIELD(hg_device_counters, d2h_copies),
    FIELD(hg_device_counters, allocs),
    FIELD(hg_device_counters, frees),
    FIELD(hg_device_counters, live_bytes),
    FIELD(hg_device_counters, peak_bytes),
    FIELD(hg_device_counters, h2d_batches),
    FIELD(hg_device_counters, d2h_batches),
    SIZE(hg_scene_param_info),
    FIELD(hg_scene_param_info, name),
    FIELD(hg_scene_param_info, def),
    FIELD(hg_scene_param_info, min),
    FIELD(hg_scene_param_info, max),
    FIELD(hg_scene_param_info, def_name),
    FIELD(hg_scene_param_info, help),
    SIZE(hg_scene_opts),
    FIELD(hg_scene_opts, scene),
    FIELD(hg_scene_opts, params),
    FIELD(hg_scene_opts, nparams),
    FIELD(hg_scene_opts, rounds),
    FIELD(hg_scene_opts, residency),
    FIELD(hg_scene_opts, verify),
    FIELD(hg_scene_opts, skip_golden),
    FIELD(hg_scene_opts, device),
    FIELD(hg_scene_opts, json_path),
    FIELD(hg_scene_opts, trace_path),
    FIELD(hg_scene_opts, svg_path),
    FIELD(hg_scene_opts, print),
    FIELD(hg_scene_opts, repeat),
    FIELD(hg_scene_opts, warmup),
    FIELD(hg_scene_opts, cancel),
    FIELD(hg_scene_opts, replay),
    SIZE(hg_kernel),
    FIELD(hg_kernel, name),
    FIELD(hg_kernel, fn),
    FIELD(hg_kernel, core),
    FIELD(hg_kernel, cl_source),
    FIELD(hg_kernel, cl_entry),
    SIZE(hg_task_arg),
    FIELD(hg_task_arg, arg),
    FIELD(hg_task_arg, access),
    FIELD(hg_task_arg, view),
    SIZE(hg_task_desc),
    FIELD(hg_task_desc, kernel),
    FIELD(hg_task_desc, args),
    FIELD(hg_task_desc, nargs),
    FIELD(hg_task_desc, scalars),
    FIELD(hg_task_desc, nscalars),
    FIELD(hg_task_desc, deps),
    FIELD(hg_task_desc, ndeps),
    SIZE(hg_scene_value),
    FIELD(hg_scene_value, name),
    FIELD(hg_scene_value, value),
    SIZE(hg_scene_param_def),
    FIELD(hg_scene_param_def, name),
    FIELD(hg_scene_param_def, def),
    FIELD(hg_scene_param_def, min),
    FIELD(hg_scene_param_def, max),
    FIELD(hg_scene_param_def, help),
    FIELD(hg_scene_param_def, alias),
    FIELD(hg_scene_param_def, values),
    SIZE(hg_scene_def),
    FIELD(hg_scene_def, size),
    FIELD(hg_scene_def, version),
    FIELD(hg_scene_def, name),
    FIELD(hg_scene_def, description),
    FIELD(hg_scene_def, params),
    FIELD(hg_scene_def, nparams),
    FIELD(hg_scene_def, make),
    FIELD(hg_scene_def, destroy),
    FIELD(hg_scene_def, host_reads),
    FIELD(hg_scene_def, splits),
    FIELD(hg_scene_def, user),
    FIELD(hg_scene_def, file),
    FIELD(hg_scene_def, cls),
};

__attribute__((visibility("default"))) const size_t hg_abi_num_fields =
    sizeof hg_abi_fields / sizeof hg_abi_fields[0];

/* Enum values the bindings hard-code, as name/value pairs. */
typedef struct hg_abi_const {
    const char *name;
    long long value;
} hg_abi_const;

#define CONST(c)                                                                                   \
    {                                                                                              \
#c, (long long)(c)                                                                         \
    }

__attribute__((visibility("default"))) const hg_abi_const hg_abi_consts[] = {
    CONST(HG_EINVAL),
    CONST(HG_EOVERFLOW),
    CONST(HG_ELIMIT),
    CONST(HG_ENOMEM),
    CONST(HG_EDEVMEM),
    CONST(HG_ECOPY),
    CONST(HG_EKERNEL),
    CONST(HG_ENOHOSTVIEW),
    CONST(HG_ERANGE),
    CONST(HG_ENOTFOUND),
    CONST(HG_EIO),
    CONST(HG_ESTALE),
    CONST(HG_EUNSUPPORTED),
    CONST(HG_IN),
    CONST(HG_OUT),
    CONST(HG_INOUT),
    CONST(HG_SCALAR),
    CONST(HG_STAGED),
    CONST(HG_RESIDENT),
    CONST(HG_FAULT_ALLOC),
    CONST(HG_FAULT_COPY),
    CONST(HG_F32),
    CONST(HG_F16),
    CONST(HG_BF16),
    CONST(HG_F64),
    CONST(HG_I8),
    CONST(HG_U8),
    CONST(HG_I16),
    CONST(HG_I32),
    CONST(HG_I64),
    CONST(HG_U64),
    CONST(HG_BOOL),
    CONST(HG_DTYPE_COUNT),
    CONST(HG_MAX_DIMS),
    CONST(HG_ECANCELED),
    CONST(HG_CORE_CUBE),
    CONST(HG_CORE_VECTOR),
    CONST(HG_CORE_ANY),
    CONST(HG_MAX_TASK_ARGS),
    CONST(HG_MAX_TASK_SCALARS),
    CONST(HG_SCENE_DEF_VERSION),
    CONST(HG_SCENE_MAX_PARAMS),
    CONST(HG_SCENE_MAX_ARGS),
    CONST(HG_SCENE_MAX_CHECKS),
};

__attribute__((visibility("default"))) const size_t hg_abi_num_consts =
    sizeof hg_abi_consts / sizeof hg_abi_consts[0];
