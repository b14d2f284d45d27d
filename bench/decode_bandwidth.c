/*
 * decode_bandwidth.c: is the decode step's projection kernel memory-bound?
 *
 * Measures, in one run, side by side:
 *   0. the compute ceiling of the path the kernels take (vdpbf16ps on
 *      avx512bf16, 8-lane FMAs on avx2) on one and two threads, which says
 *      whether both cores were ours (a shared machine's other tenants take
 *      cycles), and in bytes/s: every kernel's ratio to it is printed beside
 *      its ratio to the stream;
 *   1. a simple streaming read (sum of 64-bit words) over 1 GiB, on one and
 *      on two threads: the machine's read bandwidth;
 *   2. the projection kernel (kern_proj) at qwen3_decode preset=real's
 *      shapes with 16 rows, its output columns split over two threads (as
 *      the scene's column-tile tasks split it over cores): weight bytes read
 *      per second, on the dispatched path and on the portable one;
 *   3. the attention kernels (QK, softmax, PV) over one real layer's KV
 *      cache, the sequences split over two threads: K and V bytes per second,
 *      at qwen3_decode's group of 5 heads a kv head (memory bounds it on an
 *      AVX2 host) and at paged_attention preset=real's group of 8 (which
 *      does 1.6x the FMAs a byte: compute bounds it there);
 *   4. qwen3_decode preset=real itself for a few rounds (`--residency all`:
 *      the step's goal is for later rounds that move only what changed): per round wall,
 *      execute, staging (bind + copy back) and the bytes the execute phase
 *      reads (weights and the attention's cache rows) per second of it, and
 *      what this run's ceilings allow it: each byte at the lower of its
 *      kernel's ceiling and the 2-thread stream (medians), the execute's
 *      share of that, and the fastest round's against the best reps'; then
 *      paired: the ceiling and stream measured again after every round, and
 *      each later round against the mean of the measures right before and
 *      right after it (a co-tenant that comes and goes over seconds moves
 *      both sides of that ratio, not one).
 *
 * usage: decode_bandwidth [REPS] [LAYERS] [DEVICE]   (defaults 7, 2, sim;
 *        LAYERS 0 skips the scene); decode_bandwidth count (see count_only)
 * HG_KERNELS picks the path measured beside the portable one.
 * The stream and the kernel alternate rep by rep, so both see the same
 * (shared, noisy) machine; best and median of REPS, as STREAM reports its
 * best.  Ratios are what to compare across machines: the median of each
 * rep's ratio, and in brackets the best rep's rate over the best rep's
 * ceiling and stream (an estimate of a quiet host, where a co-tenant slowed
 * most reps).
 */
#define _DEFAULT_SOURCE /* madvise */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../scenes/kernels/kernels.h"
#include "base/clock.h"
#include "ceiling.h"
#include "scene/scene.h"

#define STREAM_BYTES (1ull << 30)
#define ROWS         16

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A second thread that lives for the whole benchmark, as the sim's core
 * threads do: a thread created per measurement would pay first-touch page
 * faults on its stack (the projection keeps ~70 KiB of scratch there).
 * Work is handed over and back by counters each side watches: first
 * spinning for up to HELPER_SPIN pauses (1 ms on host X, where a pause takes
 * 10 ns), as the sim's idle cores watch for work before they sleep, then
 * asleep on a condvar.  The helper that measures between the scene's rounds
 * sleeps at once (spin 0): spinning, it would take a core from the round
 * that follows.
 * A handoff that always slept (a pthread barrier) cost a wakeup each way:
 * on host X (KVM, 2026-12-03) the projection's 5120x5120 shape, ~5 ms a
 * call, measured 0.70-0.72 of the FMA ceiling with it against 0.74-0.76
 * spinning, side by side. */
#define HELPER_SPIN 100000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef struct helper {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_uint go, done; /* bumped once per job handed over / finished */
    void *(*fn)(void *);  /* NULL: exit */
    void *arg;
    int spin; /* pauses to spin before sleeping */
} helper;

/* Returns once *v is no longer `seen`. */
static void helper_wait(helper *h, atomic_uint *v, unsigned seen)
{
    for (int i = 0; i < h->spin; i++) {
        if (atomic_load_explicit(v, memory_order_acquire) != seen)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&h->lock);
    while (atomic_load_explicit(v, memory_order_acquire) == seen)
        pthread_cond_wait(&h->wake, &h->lock);
    pthread_mutex_unlock(&h->lock);
}

/* Bumps *v and wakes whoever sleeps on it. */
static void helper_bump(helper *h, atomic_uint *v)
{
    pthread_mutex_lock(&h->lock);
    atomic_fetch_add_explicit(v, 1, memory_order_release);
    pthread_cond_broadcast(&h->wake);
    pthread_mutex_unlock(&h->lock);
}

static void *helper_main(void *arg)
{
    helper *h = arg;
    for (unsigned seen = 0;; seen++) {
        helper_wait(h, &h->go, seen);
        if (h->fn == NULL)
            return NULL;
        h->fn(h->arg);
        helper_bump(h, &h->done);
    }
}

static bool helper_start(helper *h, int spin)
{
    h->fn = NULL;
    h->spin = spin;
    atomic_init(&h->go, 0);
    atomic_init(&h->done, 0);
    return pthread_mutex_init(&h->lock, NULL) == 0 && pthread_cond_init(&h->wake, NULL) == 0 &&
           pthread_create(&h->thread, NULL, helper_main, h) == 0;
}

static void helper_stop(helper *h)
{
    h->fn = NULL;
    helper_bump(h, &h->go);
    pthread_join(h->thread, NULL);
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->lock);
}

/* Runs fn(mine) here and fn(theirs) on the helper (if h), in parallel. */
static void run_pair(helper *h, void *(*fn)(void *), void *mine, void *theirs)
{
    unsigned done = 0;
    if (h != NULL) {
        done = atomic_load_explicit(&h->done, memory_order_relaxed);
        h->fn = fn;
        h->arg = theirs;
        helper_bump(h, &h->go); /* the release publishes fn and arg */
    }
    fn(mine);
    if (h != NULL)
        helper_wait(h, &h->done, done);
}

/* ------------------------------------------------------------ stream read */

typedef struct stream_job {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} stream_job;

static void *stream_read(void *arg)
{
    stream_job *j = arg;
    uint64_t s[8] = {0};
    for (size_t i = 0; i + 8 <= j->n; i += 8) {
        for (int l = 0; l < 8; l++)
            s[l] += j->p[i + (size_t)l];
    }
    j->sum = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    return NULL;
}

/* GB/s of one read of buf, on this thread alone or with the helper. */
static double stream_once(const uint64_t *buf, helper *h)
{
    size_t n = STREAM_BYTES / 8;
    stream_job jobs[2] = {{buf, h != NULL ? n / 2 : n, 0}, {buf + n / 2, n / 2, 0}};
    uint64_t start = clock_now_ns();
    run_pair(h, stream_read, &jobs[0], &jobs[1]);
    double gbps = (double)STREAM_BYTES / (double)(clock_now_ns() - start);
    if (jobs[0].sum + jobs[1].sum == 42)
        printf(" "); /* keep the sums live */
    return gbps;
}

/* ------------------------------------------------------ compute ceiling */

/* peak_job, peak_dp, peak_fma and bytes_per_peak_instr: ceiling.h */

/* G ceiling instructions/s on this thread alone (*one) and on both
 * together (*two), for the path the kernels take. */
static void peak_once(helper *h, double *one, double *two)
{
    peak_job jobs[2] = {{0}, {0}};
    void *(*fn)(void *) = NULL;
#if defined(__x86_64__) && defined(__GNUC__)
    kern_isa path = kern_isa_now();
    fn = path == KERN_AVX512BF16 ? peak_dp : path == KERN_AVX2 ? peak_fma : NULL;
#endif
    if (fn == NULL) {
        *one = *two = 0.0;
        return;
    }
    run_pair(NULL, fn, &jobs[0], NULL);
    *one = jobs[0].per_s / 1e9;
    run_pair(h, fn, &jobs[0], &jobs[1]);
    *two = (jobs[0].per_s + jobs[1].per_s) / 1e9;
}

/* -------------------------------------------------------------- projection */

/* One weight matrix and its activations, as a projection task sees them.
 * The weights are on transparent huge pages, like the stream's buffer, unless
 * small_pages: then on 4 KiB pages, as a host without transparent huge
 * pages gives them (the sim's arena asks for 2 MiB pages for allocations of
 * 256 KiB and more: sim.c), where a weight row's 2 KiB segments cost a TLB
 * miss each. */
typedef struct proj_case {
    const char *name;
    size_t n, k;
    bool small_pages;
    uint16_t *w;
    float *x, *y;
    kern_mat xm;
} proj_case;

#define HUGE_PAGE (2u << 20)

static bool proj_case_init(proj_case *pc)
{
    size_t bytes = (pc->n * pc->k * 2 + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    pc->w = aligned_alloc(HUGE_PAGE, bytes);
    if (pc->w != NULL && !pc->small_pages)
        (void)madvise(pc->w, bytes, MADV_HUGEPAGE);
    pc->x = aligned_alloc(64, ROWS * pc->k * 4); /* as the scene's tiles are */
    pc->y = malloc(ROWS * pc->n * 4);
    if (pc->w == NULL || pc->x == NULL || pc->y == NULL)
        return false;
    for (size_t i = 0; i < pc->n * pc->k; i++)
        pc->w[i] = kern_f32_to_bf16((float)((i * 2654435761u) % 2001) * 1e-3f - 1.0f);
    for (size_t i = 0; i < ROWS * pc->k; i++)
        pc->x[i] = (float)(i % 17) * 0.1f - 0.8f;
    pc->xm = (kern_mat){(char *)pc->x, HG_F32, 1, ROWS, pc->k, 0, pc->k, 1};
    return true;
}

typedef struct proj_job {
    const kern_mat *x;
    const uint16_t *w;
    size_t n, k, ldy;
    float *y;
} proj_job;

static void *proj_run(void *arg)
{
    proj_job *j = arg;
    kern_proj(j->x, j->w, j->n, j->k, j->k, j->y, j->ldy);
    return NULL;
}

/* GB/s of weights read by one y = x . w^T with the output columns split
 * over two threads. */
static double proj_once(const proj_case *pc, helper *h)
{
    size_t half = pc->n / 2, k = pc->k;
    proj_job jobs[2] = {{&pc->xm, pc->w, half, k, pc->n, pc->y},
                        {&pc->xm, pc->w + half * k, pc->n - half, k, pc->n, pc->y + half}};
    uint64_t start = clock_now_ns();
    run_pair(h, proj_run, &jobs[0], &jobs[1]);
    return (double)(pc->n * k * 2) / (double)(clock_now_ns() - start);
}

/* -------------------------------------------------------------- attention */

/* The attention of one layer: D 128, blocks of 128 tokens, chunks of 4
 * blocks (QK, softmax and PV per chunk, as the scenes' tasks; the merge
 * reads a few KiB and is left out), each sequence's blocks spread through
 * the cache as a block table spreads them.  Two shapes: qwen3_decode
 * preset=real's layer (16 sequences of 3500 tokens, 40 heads over 8 kv
 * heads) and paged_attention preset=real's heads (16 over 2 kv heads) over
 * 32 of its sequences of its mean length, 7296 tokens: about as many bytes
 * (229 and 239 MB of K and V). */
#define ATTN_D     128
#define ATTN_BLOCK 128
#define ATTN_CHUNK 4
#define ATTN_CASES 2

typedef struct attn_shape {
    const char *name, *what;
    size_t seqs, tokens, kvh, group;
} attn_shape;

static const attn_shape attn_shapes[ATTN_CASES] = {
    {"16 x 3500 x 8 x 128", "qwen3_decode's layer: 40 heads over 8 kv heads", 16, 3500, 8, 5},
    {"32 x 7296 x 2 x 128", "paged_attention's heads: 16 over 2 kv heads", 32, 7296, 2, 8}};

typedef struct attn_case {
    const attn_shape *sh;
    uint16_t *k, *v; /* [blocks][ATTN_BLOCK][kvh][ATTN_D] */
    size_t *table;   /* [seqs][seq_blocks] */
    size_t seq_blocks, block_elems;
    float *q; /* [kvh * group * ATTN_D] */
} attn_case;

static bool attn_case_init(attn_case *ac, const attn_shape *sh)
{
    *ac = (attn_case){.sh = sh,
                      .seq_blocks = (sh->tokens + ATTN_BLOCK - 1) / ATTN_BLOCK,
                      .block_elems = (size_t)ATTN_BLOCK * sh->kvh * ATTN_D};
    size_t blocks = sh->seqs * ac->seq_blocks, bytes = blocks * ac->block_elems * 2;
    ac->k = aligned_alloc(HUGE_PAGE, (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    ac->v = aligned_alloc(HUGE_PAGE, (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    ac->table = malloc(blocks * sizeof *ac->table);
    ac->q = malloc(sh->kvh * sh->group * ATTN_D * sizeof *ac->q);
    if (ac->k == NULL || ac->v == NULL || ac->table == NULL || ac->q == NULL)
        return false;
    (void)madvise(ac->k, bytes, MADV_HUGEPAGE);
    (void)madvise(ac->v, bytes, MADV_HUGEPAGE);
    for (size_t i = 0; i < blocks * ac->block_elems; i++) {
        ac->k[i] = kern_f32_to_bf16((float)((i * 2654435761u) % 2001) * 1e-3f - 1.0f);
        ac->v[i] = kern_f32_to_bf16((float)((i * 40503u) % 1999) * 1e-3f - 1.0f);
    }
    /* block b of sequence s: a stride through the cache (37 is prime to
     * both shapes' block counts, 448 and 1824) */
    for (size_t b = 0; b < blocks; b++)
        ac->table[(b % sh->seqs) * ac->seq_blocks + b / sh->seqs] = (b * 37) % blocks;
    for (size_t i = 0; i < sh->kvh * sh->group * ATTN_D; i++)
        ac->q[i] = (float)(i % 23) * 0.05f - 0.5f;
    return true;
}

static void attn_case_free(attn_case *ac)
{
    free(ac->k);
    free(ac->v);
    free(ac->table);
    free(ac->q);
}

typedef struct attn_job {
    const attn_case *ac;
    size_t s0, s1; /* sequences */
    float *scores, *stats, *part;
    int rc;
} attn_job;

static void *attn_run(void *arg)
{
    attn_job *j = arg;
    const attn_case *ac = j->ac;
    const attn_shape *sh = ac->sh;
    size_t heads = sh->kvh * sh->group, ctok = ATTN_CHUNK * ATTN_BLOCK;
    size_t qs[2] = {1, heads * ATTN_D}, ss[2] = {heads, ctok}, sts[2] = {heads, 2};
    size_t ps[2] = {heads, ATTN_D}, bs[3] = {ATTN_BLOCK, sh->kvh, ATTN_D};
    j->rc = 0;
    for (size_t s = j->s0; s < j->s1; s++) {
        const size_t *row = ac->table + s * ac->seq_blocks;
        for (size_t c = 0; c < ac->seq_blocks; c += ATTN_CHUNK) {
            size_t nb = ac->seq_blocks - c < ATTN_CHUNK ? ac->seq_blocks - c : ATTN_CHUNK;
            size_t first = c * ATTN_BLOCK, tokens = sh->tokens - first < nb * ATTN_BLOCK
                                                        ? sh->tokens - first
                                                        : nb * ATTN_BLOCK;
            uint64_t sc[2] = {tokens, hg_scalar_f64(0.08838834764831845)};
            hg_kview a[ATTN_CHUNK + 2];
            a[0] = kern_dense_view(ac->q, HG_F32, 2, qs);
            for (size_t b = 0; b < nb; b++)
                a[1 + b] = kern_dense_view(ac->k + row[c + b] * ac->block_elems, HG_BF16, 3, bs);
            a[1 + nb] = kern_dense_view(j->scores, HG_F32, 2, ss);
            j->rc |= kern_call(&kern_attn_qk, a, (uint32_t)nb + 2, sc, 2);
            hg_kview sm[2] = {kern_dense_view(j->scores, HG_F32, 2, ss),
                              kern_dense_view(j->stats, HG_F32, 2, sts)};
            j->rc |= kern_call(&kern_attn_softmax, sm, 2, sc, 1);
            a[0] = sm[0];
            for (size_t b = 0; b < nb; b++)
                a[1 + b].data = ac->v + row[c + b] * ac->block_elems;
            a[1 + nb] = kern_dense_view(j->part, HG_F32, 2, ps);
            j->rc |= kern_call(&kern_attn_pv, a, (uint32_t)nb + 2, sc, 1);
        }
    }
    return NULL;
}

static void attn_jobs_free(attn_job jobs[2])
{
    for (int i = 0; i < 2; i++) {
        free(jobs[i].scores);
        free(jobs[i].stats);
        free(jobs[i].part);
    }
}

/* The two threads' jobs over ac, their sequences split in halves; false
 * when out of memory (what was taken is freed). */
static bool attn_jobs_init(const attn_case *ac, attn_job jobs[2])
{
    size_t heads = ac->sh->kvh * ac->sh->group, ctok = ATTN_CHUNK * ATTN_BLOCK;
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        jobs[i] = (attn_job){ac,
                             i * ac->sh->seqs / 2,
                             (i + 1) * ac->sh->seqs / 2,
                             malloc(heads * ctok * 4),
                             malloc(heads * 2 * 4),
                             malloc(heads * ATTN_D * 4),
                             0};
        ok = ok && jobs[i].scores != NULL && jobs[i].stats != NULL && jobs[i].part != NULL;
    }
    if (!ok)
        attn_jobs_free(jobs);
    return ok;
}

/* GB/s of K and V read by the layer's attention, its sequences split over
 * two threads; 0 if a kernel failed. */
static double attn_once(const attn_case *ac, helper *h, attn_job *jobs)
{
    uint64_t start = clock_now_ns();
    run_pair(h, attn_run, &jobs[0], &jobs[1]);
    double bytes = 2.0 * (double)(ac->sh->seqs * ac->sh->tokens * ac->sh->kvh * ATTN_D * 2);
    return jobs[0].rc || jobs[1].rc ? 0.0 : bytes / (double)(clock_now_ns() - start);
}

/* ------------------------------------------------------------- the scene */

/* The 2-thread ceiling and stream measured again after each round, before
 * the next: the host's co-tenants change its speed from one second to the
 * next (on Z3 the same step took 75 to 91 ms in runs a minute apart), and
 * the ceilings measure() took seconds before the rounds need not be what the
 * rounds ran beside.  The stream first, then the ceiling, as measure() does
 * before its kernels. */
typedef struct between {
    helper h;
    uint64_t *buf;     /* STREAM_BYTES, touched */
    double ceil[64];   /* G ceiling instructions/s on 2 threads, after round i + 1 */
    double one[64];    /* the same on this thread alone */
    double stream[64]; /* 2-thread GB/s, after round i + 1 */
} between;

typedef struct scene_log {
    double wall[64], exec[64], staging[64];
    uint64_t h2d, d2h;
    uint32_t rounds;
    between *b; /* NULL: no measures between rounds */
} scene_log;

static void note_round(void *user, uint32_t round, const scene_case *c, const hg_run_stats *s)
{
    scene_log *log = user;
    if (round > 64)
        return;
    log->wall[round - 1] = (double)s->wall_ns / 1e6;
    log->exec[round - 1] = (double)s->exec_ns / 1e6;
    log->staging[round - 1] = (double)(s->bind_ns + s->copyback_ns) / 1e6;
    log->h2d = s->h2d_bytes;
    log->d2h = s->d2h_bytes;
    log->rounds = round;
    if (log->b != NULL) {
        log->b->stream[round - 1] = stream_once(log->b->buf, &log->b->h);
        peak_once(&log->b->h, &log->b->one[round - 1], &log->b->ceil[round - 1]);
    }
}

/* Bytes the execute phase must read: every weight (*weights), and the
 * cache rows the attention reads (*cache: each sequence's tokens, K and V,
 * every layer). */
static void exec_read_bytes(const scene_case *c, double *weights, double *cache)
{
    *weights = *cache = 0.0;
    for (uint32_t i = 0; i < c->nargs; i++) {
        const char *name = c->args[i].name;
        if (c->args[i].dir == HG_IN && c->args[i].tensor.dtype == HG_BF16 &&
            strcmp(name, "hidden_states") != 0)
            *weights += (double)hg_hostbuf_size(c->args[i].tensor.host);
    }
    const hg_tensor *kc = NULL;
    const int32_t *lens = NULL;
    size_t batch = 0;
    for (uint32_t i = 0; i < c->nargs; i++) {
        if (strcmp(c->args[i].name, "k_cache") == 0)
            kc = &c->args[i].tensor;
        if (strcmp(c->args[i].name, "seq_lens") == 0) {
            lens = scene_case_data(c, i);
            batch = c->args[i].tensor.shape[0];
        }
    }
    for (size_t b = 0; kc != NULL && lens != NULL && b < batch; b++)
        *cache += 2.0 * (double)kc->shape[0] * (double)lens[b] *
                  (double)(kc->shape[3] * kc->shape[4]) * 2;
}

/* What measure() found, in GB/s: the 2-thread stream and the 2-thread
 * ceiling as bytes of weights and of K and V (0 on a path without one), the
 * medians and the best reps. */
typedef struct rates {
    double stream_med, weights, kv;
    double stream_best, weights_best, kv_best;
    double w_per_instr, kv_per_instr; /* bytes one ceiling instruction covers */
} rates;

/* The rate (GB/s) that bounds a kernel: the lower of its ceiling and the
 * stream. */
static double bound(double ceiling, double stream)
{
    return ceiling < stream ? ceiling : stream;
}

/* Each later round against the ceiling and stream measured right before and
 * right after it (their means): what that round's bytes were allowed, and
 * the execute's share of it; the median and the range over the rounds, and
 * over the rounds whose ceilings on both sides were whole (2 threads at least
 * PAIR_WHOLE x 1: a co-tenant that took part of a core while the ceiling
 * was measured makes a round's allowed too long and its ratio too high).
 * exec: every round's execute (ms), in round order. */
#define PAIR_WHOLE 1.9

static void ratio_range(const double *v, int n, double *lo, double *hi)
{
    *lo = *hi = n > 0 ? v[0] : 0.0;
    for (int i = 1; i < n; i++) {
        *lo = v[i] < *lo ? v[i] : *lo;
        *hi = v[i] > *hi ? v[i] : *hi;
    }
}

static void print_between(const between *b, const double *exec, int later, double weights,
                          double cache, const rates *m)
{
    double ratio[64] = {0}, allowed[64] = {0}, whole[64] = {0};
    int nwhole = 0;
    for (int i = 0; i < later; i++) { /* round i + 2: measured after rounds i + 1 and i + 2 */
        double ceil = (b->ceil[i] + b->ceil[i + 1]) / 2;
        double stream = (b->stream[i] + b->stream[i + 1]) / 2;
        allowed[i] = weights / (bound(ceil * m->w_per_instr, stream) * 1e6) +
                     cache / (bound(ceil * m->kv_per_instr, stream) * 1e6);
        ratio[i] = allowed[i] / exec[i + 1];
        if (b->ceil[i] >= PAIR_WHOLE * b->one[i] && b->ceil[i + 1] >= PAIR_WHOLE * b->one[i + 1])
            whole[nwhole++] = ratio[i];
    }
    double lo, hi, a_lo, a_hi, w_lo, w_hi;
    ratio_range(ratio, later, &lo, &hi);
    ratio_range(allowed, later, &a_lo, &a_hi);
    ratio_range(whole, nwhole, &w_lo, &w_hi);
    printf("  paired, each round against the ceiling and stream measured right before and right "
           "after it: allowed %.1f-%.1f ms; execute %.2f of it at the median (rounds %.2f-%.2f); "
           "the %d of %d rounds whose ceilings were whole (2 threads >= %.1fx 1): %.2f "
           "(%.2f-%.2f)\n",
           a_lo, a_hi, median(ratio, later), lo, hi, nwhole, later, PAIR_WHOLE,
           nwhole > 0 ? median(whole, nwhole) : 0.0, w_lo, w_hi);
}

static int run_scene(int reps, const char *layers, const char *spec, const rates *m)
{
    const scene *s = scene_find("qwen3_decode");
    scene_log log = {0};
    scene_run_opts o = {.scene = s,
                        .rounds = (uint32_t)reps + 1,
                        .quiet = true,
                        .skip_golden = true,
                        .residency = SCENE_RESIDENCY_ALL, /* later rounds move only what changed */
                        .on_round = note_round,
                        .on_round_user = &log,
                        .out = stdout,
                        .err = stderr};
    char kv[64];
    snprintf(kv, sizeof kv, "layers=%s", layers);
    scene_params_default(s, o.params);
    if (scene_param_set(s, o.params, "preset=real", NULL) != 0 ||
        scene_param_set(s, o.params, kv, NULL) != 0)
        return 2;
    hg_device *dev = NULL;
    scene_case *c = NULL;
    hg_err err;
    err_clear(&err);
    if (hg_device_open(spec, &dev, NULL, 0) != 0 || scene_case_make(s, o.params, &c, &err) != 0) {
        fprintf(stderr, "decode_bandwidth: %s\n", err.msg);
        hg_device_close(dev);
        return 3;
    }
    between b;
    b.buf = MAP_FAILED;
    if (m->weights > 0 && m->kv > 0) {
        b.buf =
            mmap(NULL, STREAM_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b.buf != MAP_FAILED) {
            (void)madvise(b.buf, STREAM_BYTES, MADV_HUGEPAGE);
            memset(b.buf, 1, STREAM_BYTES);
            if (helper_start(&b.h, 0))
                log.b = &b;
        }
    }
    int rc = scene_run_case(&o, dev, c);
    if (log.b != NULL)
        helper_stop(&b.h);
    if (b.buf != MAP_FAILED)
        munmap(b.buf, STREAM_BYTES);
    double weights, cache;
    exec_read_bytes(c, &weights, &cache);
    scene_case_destroy(c);
    hg_device_close(dev);
    if (rc != 0 || log.rounds < 2)
        return 3;
    int later = (int)log.rounds - 1; /* round 1 pays first-touch page faults */
    double first_exec = log.exec[0], exec_in_order[64];
    memcpy(exec_in_order, log.exec, sizeof exec_in_order); /* median() sorts */
    double wall = median(log.wall + 1, later), exec = median(log.exec + 1, later);
    double staging = median(log.staging + 1, later);
    printf("\nqwen3_decode preset=real %s on %s, %d later rounds (median):\n", kv, spec, later);
    printf("  round 1 wall %.1f ms (exec %.1f ms); later rounds wall %.1f ms, exec %.1f ms, "
           "staging (bind + copy back) %.1f ms\n",
           log.wall[0], first_exec, wall, exec, staging);
    printf("  h2d %llu bytes, d2h %llu bytes per round\n", (unsigned long long)log.h2d,
           (unsigned long long)log.d2h);
    double bytes = weights + cache;
    printf("  execute reads %.0f MB of weights and cache: %.2f GB/s, %.2f of the 2-thread "
           "stream's best\n",
           bytes / 1e6, bytes / (exec * 1e6), bytes / (exec * 1e6) / m->stream_best);
    if (m->weights > 0 && m->kv > 0) {
        /* each byte at what bounds its kernel: the ceiling or the stream */
        double w_rate = bound(m->weights, m->stream_med), c_rate = bound(m->kv, m->stream_med);
        double allowed = weights / (w_rate * 1e6) + cache / (c_rate * 1e6);
        /* median() sorted the later rounds: the fastest is the first */
        double best = weights / (bound(m->weights_best, m->stream_best) * 1e6) +
                      cache / (bound(m->kv_best, m->stream_best) * 1e6);
        printf("  allowed by this run's ceilings: %.1f ms (%.0f MB of weights at %.2f GB/s, "
               "%.0f MB of cache at %.2f GB/s: the median ceiling or stream, the lower); "
               "execute %.2f of it (the fastest round against the best reps' ceiling and "
               "stream: %.2f, a quiet host's estimate)\n",
               allowed, weights / 1e6, w_rate, cache / 1e6, c_rate, allowed / exec,
               best / log.exec[1]);
    }
    if (log.b != NULL)
        print_between(log.b, exec_in_order, later, weights, cache, m);
    return 0;
}

#define NSHAPES 4

/* Stream and kernels interleaved rep by rep, so that both see the same
 * machine (it is shared: other load lowers both); best and median of each. */
static int measure(int reps, rates *m)
{
    uint64_t *buf =
        mmap(NULL, STREAM_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    proj_case pc[NSHAPES] = {
        {.name = "wq/wo 5120x5120", .n = 5120, .k = 5120},
        {.name = "w_gate/w_up 17408x5120", .n = 17408, .k = 5120},
        {.name = "w_down 5120x17408", .n = 5120, .k = 17408},
        {.name = "w_gate, 4 KiB pages", .n = 17408, .k = 5120, .small_pages = true}};
    if (buf == MAP_FAILED)
        return 3;
    (void)madvise(buf, STREAM_BYTES, MADV_HUGEPAGE);
    memset(buf, 1, STREAM_BYTES); /* first touch outside the timing */
    for (int i = 0; i < NSHAPES; i++) {
        if (!proj_case_init(&pc[i]))
            return 3;
    }
    double p1[64], p2[64], s1[64], s2[64], fast[NSHAPES][64], portable[NSHAPES][3],
        attn[ATTN_CASES][64], attn_portable[ATTN_CASES][3];
    attn_case ac[ATTN_CASES];
    attn_job jobs[ATTN_CASES][2];
    for (int a = 0; a < ATTN_CASES; a++) {
        if (!attn_case_init(&ac[a], &attn_shapes[a]) || !attn_jobs_init(&ac[a], jobs[a]))
            return 3;
    }
    helper h;
    if (!helper_start(&h, HELPER_SPIN))
        return 3;
    kern_force_portable(false);
    const char *path = kern_path();
    for (int r = 0; r < reps; r++) {
        s1[r] = stream_once(buf, NULL);
        s2[r] = stream_once(buf, &h);
        /* the ceiling right before the kernels it divides: after the
         * stream's ~50 ms of memory-bound reading the first kernel case ran
         * slow (on host Z3 wq/wo measured 0.69 of the ceiling at the median
         * where the same matrix, again at the end of the rep, measured 0.77;
         * 10.2 GB/s against 11.0 after a 1 GiB read instead of 64 MiB, in a
         * harness); with the ceiling's 20 ms of FMAs between the stream and
         * the kernels, both are measured from one state */
        peak_once(&h, &p1[r], &p2[r]);
        for (int i = 0; i < NSHAPES; i++)
            fast[i][r] = proj_once(&pc[i], &h);
        for (int a = 0; a < ATTN_CASES; a++)
            attn[a][r] = attn_once(&ac[a], &h, jobs[a]);
    }
    /* each rep's ratios to that rep's ceiling and stream: on a shared
     * machine these hold still better than either rate does */
    double rc[NSHAPES + ATTN_CASES][64], rs[NSHAPES + ATTN_CASES][64];
    kern_isa isa = kern_isa_now();
    /* bytes of K or V one ceiling instruction covers: each 8 (avx2) or 16
     * (avx512) bf16 feed `group` f32 FMAs (taken at the ceiling
     * instruction's rate) */
    double attn_bpi[ATTN_CASES];
    for (int a = 0; a < ATTN_CASES; a++)
        attn_bpi[a] = (isa == KERN_AVX512BF16 ? 32.0 : 16.0) / (double)attn_shapes[a].group;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < NSHAPES + ATTN_CASES; i++) {
            double got = i < NSHAPES ? fast[i][r] : attn[i - NSHAPES][r];
            double ceiling =
                p2[r] * (i < NSHAPES ? bytes_per_peak_instr(isa) : attn_bpi[i - NSHAPES]);
            rc[i][r] = ceiling > 0 ? got / ceiling : 0.0;
            rs[i][r] = got / s2[r];
        }
    }
    kern_force_portable(true);
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < NSHAPES; i++)
            portable[i][r] = proj_once(&pc[i], &h);
        for (int a = 0; a < ATTN_CASES; a++)
            attn_portable[a][r] = attn_once(&ac[a], &h, jobs[a]);
    }
    kern_force_portable(false);
    helper_stop(&h);
    munmap(buf, STREAM_BYTES);
    /* median() sorts, so the best is then the last */
    double s1_med = median(s1, reps), s1_best = s1[reps - 1];
    double s2_med = median(s2, reps), s2_best = s2[reps - 1];
    double p1_med = median(p1, reps), p2_med = median(p2, reps);
    /* the ceilings in bytes/s on 2 threads: weights at 16 rows; K and V at
     * each attention shape's group */
    printf("%s ceiling, G/s median: 1 thread %.2f, 2 threads %.2f (%.2fx: 2.00 when both "
           "cores are free): %.2f GB/s of weights at 16 rows, %.2f GB/s of K and V at %zu heads "
           "a kv head, %.2f at %zu\n",
           isa == KERN_AVX512BF16 ? "vdpbf16ps"
           : isa == KERN_AVX2     ? "vfmadd231ps ymm"
                                  : "no",
           p1_med, p2_med, p1_med > 0 ? p2_med / p1_med : 0.0, p2_med * bytes_per_peak_instr(isa),
           p2_med * attn_bpi[0], attn_shapes[0].group, p2_med * attn_bpi[1], attn_shapes[1].group);
    printf("stream read of 1 GiB, %d reps, best / median GB/s: 1 thread %.2f / %.2f, "
           "2 threads %.2f / %.2f\n",
           reps, s1_best, s1_med, s2_best, s2_med);
    /* the best rep's rate over the best rep's ceiling and stream: what a
     * quiet host would give, where a co-tenant slowed most reps (each
     * best is its own rep's) */
    double c_best = p2[reps - 1] * bytes_per_peak_instr(isa);
    printf("projection, 16 rows, 2 threads, GB/s of weights, best / median; the median of each "
           "rep's ratio to that rep's 2-thread ceiling and 2-thread stream (in brackets: the best "
           "rate over the best ceiling and the best stream); portable median:\n");
    for (int i = 0; i < NSHAPES; i++) {
        double med = median(fast[i], reps), best = fast[i][reps - 1];
        printf(
            "  %-24s %s %6.2f / %6.2f  ceiling %.2f (%.2f)  stream %.2f (%.2f)   portable %5.2f\n",
            pc[i].name, path, best, med, median(rc[i], reps), c_best > 0 ? best / c_best : 0.0,
            median(rs[i], reps), best / s2_best, median(portable[i], 3));
        free(pc[i].w);
        free(pc[i].x);
        free(pc[i].y);
    }
    printf("attention of one layer (QK, softmax, PV; sequences x tokens x kv heads x D), 2 "
           "threads, GB/s of K and V and ratios as above (the goal is for the ratio to the lower "
           "bound, the larger ratio):\n");
    for (int a = 0; a < ATTN_CASES; a++) {
        double med = median(attn[a], reps), best = attn[a][reps - 1];
        double a_best = p2[reps - 1] * attn_bpi[a];
        printf("  %-24s %s %6.2f / %6.2f  ceiling %.2f (%.2f)  stream %.2f (%.2f)   portable "
               "%5.2f   (%s)\n",
               attn_shapes[a].name, path, best, med, median(rc[NSHAPES + a], reps),
               a_best > 0 ? best / a_best : 0.0, median(rs[NSHAPES + a], reps), best / s2_best,
               median(attn_portable[a], 3), attn_shapes[a].what);
        attn_jobs_free(jobs[a]);
        attn_case_free(&ac[a]);
    }
    /* the scene is qwen3_decode: its cache at the first shape's group */
    *m = (rates){.stream_med = s2_med,
                 .weights = p2_med * bytes_per_peak_instr(isa),
                 .kv = p2_med * attn_bpi[0],
                 .stream_best = s2_best,
                 .weights_best = c_best,
                 .kv_best = p2[reps - 1] * attn_bpi[0],
                 .w_per_instr = bytes_per_peak_instr(isa),
                 .kv_per_instr = attn_bpi[0]};
    return 0;
}

/* `count`: each projection shape once on this thread, for an instruction
 * count (callgrind counts the same whatever the load; valgrind 3.19 cannot
 * run AVX-512, so force another path):
 *   HG_KERNELS=avx2 valgrind --tool=callgrind --toggle-collect=kern_proj \
 *       build/decode_bandwidth count
 * and divide the Ir by the weight bytes it prints. */
static int count_only(void)
{
    proj_case pc[3] = {{.name = "5120x5120", .n = 5120, .k = 5120},
                       {.name = "17408x5120", .n = 17408, .k = 5120},
                       {.name = "5120x17408", .n = 5120, .k = 17408}};
    double bytes = 0.0;
    for (int i = 0; i < 3; i++) {
        if (!proj_case_init(&pc[i]))
            return 3;
        kern_proj(&pc[i].xm, pc[i].w, pc[i].n, pc[i].k, pc[i].k, pc[i].y, pc[i].n);
        bytes += (double)(pc[i].n * pc[i].k * 2);
        free(pc[i].w);
        free(pc[i].x);
        free(pc[i].y);
    }
    printf("kern_proj on the %s path, 16 rows: %.0f weight bytes (5120x5120, 17408x5120, "
           "5120x17408)\n",
           kern_path(), bytes);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "count") == 0)
        return count_only();
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    const char *layers = argc > 2 ? argv[2] : "2";
    const char *spec = argc > 3 ? argv[3] : "sim";
    reps = reps < 1 ? 1 : reps > 63 ? 63 : reps;
    rates m = {0};
    int rc = measure(reps, &m);
    if (rc != 0 || strcmp(layers, "0") == 0) /* LAYERS 0: the kernel only */
        return rc;
    return run_scene(reps, layers, spec, &m);
}
