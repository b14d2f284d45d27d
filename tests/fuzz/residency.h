/*
 * residency.h: fuzz_residency's world and its oracle (residency_oracle.c).
 *
 * The world holds what the oracle knows: per host buffer slot the bytes the
 * host must hold and the generation it must have, the declared changes
 * (for "nothing changed since") and any undeclared write; per runner its
 * last run and the resident copies it may hold.
 */
#ifndef HG_FUZZ_RESIDENCY_H
#define HG_FUZZ_RESIDENCY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hostgraph.h"

enum { NDEV = 2, NRUNNER = 3, NBUF = 4, MAX_BUF = 512, MAX_ARGS = 4, VIEW = 256, MAX_OPS = 64 };
enum { MAX_KEYS = 256 };

typedef struct fz_buf {
    hg_hostbuf *hb;
    unsigned char *mem; /* wrapped harness memory, or NULL when created */
    size_t size;
    unsigned char model[MAX_BUF]; /* the bytes the host must hold */
    uint64_t gen;                 /* the generation it must have */
    uint64_t changes;             /* declared changes (writes, copy-backs, re-wraps) */
    bool pending;                 /* an undeclared write in [ulo, uhi) */
    bool virgin;                  /* no declared change since registered */
    size_t ulo, uhi;
} fz_buf;

/* One run's args, as generated. */
typedef struct fz_run {
    uint32_t n;
    hg_arg args[MAX_ARGS];
    int slot[MAX_ARGS]; /* host buffer slot, or -1 for a device view */
    int vdev[MAX_ARGS]; /* a device view's device */
    size_t lo[MAX_ARGS], len[MAX_ARGS];
    hg_range cut[MAX_ARGS]; /* what the task touches, within the extent */
    /* A host write through the API during orchestration. */
    int iw_slot; /* -1: none */
    size_t iw_lo, iw_len;
    unsigned char iw_val;
    bool iw_done;
    hg_hostbuf *iw_hb;
} fz_run;

/* A resident copy's key: host buffer id and byte extent. */
typedef struct fz_key {
    uint64_t id;
    size_t lo, hi;
} fz_key;

typedef struct fz_runner {
    hg_runner *r;
    uint32_t dev;
    bool verify;
    /* The last run, while nothing it depends on changed (else !valid). */
    bool last_valid, last_ok, last_fit;
    fz_run last;
    uint64_t last_changes[NBUF];
    unsigned char last_bytes[NBUF][MAX_BUF]; /* the host bytes after it */
    fz_key keys[MAX_KEYS];                   /* resident copies it may hold: of live buffers */
    uint32_t nkeys;
} fz_runner;

typedef struct fz_world {
    fz_in in;
    hg_device *dev[NDEV];
    hg_devaddr view[NDEV];
    unsigned char view_model[NDEV][VIEW];
    fz_runner run[NRUNNER];
    fz_buf buf[NBUF];
    bool bug[12]; /* known defects whose scenarios are generated */
    bool trace;   /* HG_FUZZ_TRACE=1: print each operation */
} fz_world;

#define TRACE(w, ...)                                                                              \
    do {                                                                                           \
        if ((w)->trace)                                                                            \
            fprintf(stderr, __VA_ARGS__);                                                          \
    } while (0)

static inline unsigned char *buf_data(const fz_buf *b)
{
    return hg_hostbuf_data(b->hb);
}

/* A declared change: a write, a mark, a copy-back. */
static inline void buf_changed(fz_buf *b)
{
    b->changes++;
    b->virgin = false;
}

static inline bool is_written(hg_dir d)
{
    return d == HG_OUT || d == HG_INOUT;
}

/* What the oracle expects of a run before it starts. */
typedef struct fz_expect {
    bool einval;     /* overlapping host args, one of them written */
    bool refuse;     /* a view of another device (defect 2) */
    bool may_stale;  /* a resident arg over an undeclared write, in verify mode */
    bool must_stale; /* ... and its copy is current: an exact repeat */
    bool must_zero;  /* an exact repeat, nothing changed: no byte moves up */
    bool faulted;
} fz_expect;

/* Every host byte and generation as the oracle says; `when` names the moment. */
void residency_check_host(const fz_world *w, const char *when);
/* What runner r's run must give, before it starts (repeat: an exact repeat
 * of the runner's last run). */
void residency_expect(const fz_world *w, uint32_t r, const fz_run *run, bool repeat, fz_expect *x);
/* The bytes each written arg's cut must hold after the run. */
void residency_outputs(const fz_world *w, uint32_t r, const fz_run *run,
                       unsigned char out[MAX_ARGS][MAX_BUF]);
/* After a successful run: moves the model on (outputs, generations) and
 * checks the stats and hg_runner_copied_back. */
void residency_check_success(fz_world *w, uint32_t r, const fz_run *run, const fz_expect *x,
                             unsigned char out[MAX_ARGS][MAX_BUF], const hg_run_stats *s);
/* One line per run when tracing (HG_FUZZ_TRACE=1). */
void residency_trace(const fz_world *w, uint32_t r, const fz_run *run, bool repeat,
                     const fz_expect *x, int rc, const hg_run_stats *s);

#endif
