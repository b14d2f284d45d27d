/*
 * consumer.c: an application outside the project that links only the core
 * library, as installed (built by install_test.sh with pkg-config and with
 * find_package).  It brings its own kernel and orchestration: out = 2 * in
 * over a resident input, run twice, and checks the result and that the
 * second run moved no input bytes.
 */
#include <stdio.h>
#include <string.h>

#include <hostgraph.h>

enum { N = 4096, TILE = 1000 };

static int twice(const hg_kernel_ctx *ctx)
{
    const float *in = ctx->args[0].data;
    float *out = ctx->args[1].data;
    for (size_t i = 0; i < ctx->args[0].shape[0]; i++)
        out[i] = 2.0f * in[i];
    return 0;
}

static const hg_kernel twice_kernel = {"twice", twice, HG_CORE_VECTOR, NULL, NULL};

static int orchestrate(hg_orch *o, void *user)
{
    (void)user;
    const hg_arg *in, *out;
    int rc;
    if ((rc = hg_orch_arg(o, 0, &in)) != 0 || (rc = hg_orch_arg(o, 1, &out)) != 0)
        return rc;
    for (size_t start = 0; start < N; start += TILE) {
        size_t len = N - start < TILE ? N - start : TILE;
        hg_task_arg targs[2] = {{0, HG_IN, in->tensor}, {1, HG_OUT, out->tensor}};
        if ((rc = hg_tensor_slice(&targs[0].view, 0, start, len, &targs[0].view)) != 0 ||
            (rc = hg_tensor_slice(&targs[1].view, 0, start, len, &targs[1].view)) != 0)
            return rc;
        hg_task_desc d = {.kernel = &twice_kernel, .args = targs, .nargs = 2};
        if ((rc = hg_task_submit(o, &d, NULL)) != 0)
            return rc;
    }
    return 0;
}

int main(void)
{
    static float in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = (float)i;
    hg_device *dev = NULL;
    hg_runner *run = NULL;
    hg_hostbuf *hin = NULL, *hout = NULL;
    hg_tensor tin, tout;
    size_t shape[1] = {N};
    char msg[256] = "";
    if (hg_device_open("sim:cores=2", &dev, msg, sizeof msg) != 0 ||
        hg_runner_open(dev, &run) != 0 || hg_hostbuf_wrap(in, sizeof in, &hin) != 0 ||
        hg_hostbuf_wrap(out, sizeof out, &hout) != 0 ||
        hg_tensor_host(&tin, hin, HG_F32, 1, shape) != 0 ||
        hg_tensor_host(&tout, hout, HG_F32, 1, shape) != 0) {
        fprintf(stderr, "consumer: setup failed %s\n", msg);
        return 1;
    }
    hg_arg args[2] = {{"in", HG_IN, tin, 0, HG_RESIDENT}, {"out", HG_OUT, tout, 0, HG_STAGED}};
    hg_callable c = {"twice", orchestrate, NULL};
    hg_run_stats s1, s2;
    if (hg_runner_run(run, &c, args, 2, &s1) != 0 || hg_runner_run(run, &c, args, 2, &s2) != 0) {
        fprintf(stderr, "consumer: %s\n", hg_runner_errmsg(run));
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += out[i] != 2.0f * (float)i;
    printf("consumer (hostgraph %s): %d wrong, run 1 uploaded %llu bytes, run 2 %llu\n", HG_VERSION,
           bad, (unsigned long long)s1.h2d_bytes, (unsigned long long)s2.h2d_bytes);
    hg_runner_close(run);
    hg_hostbuf_destroy(hin);
    hg_hostbuf_destroy(hout);
    hg_device_close(dev);
    return bad == 0 && s1.h2d_bytes == sizeof in && s2.h2d_bytes == 0 ? 0 : 1;
}
