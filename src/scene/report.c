/*
 * report.c: renders a scene_report as the table, the summary line and JSON.
 *
 * The table's columns and the JSON's field names are the CLI contract of
 * issue 2; change them only with the issue.  Times are milliseconds, bytes
 * are exact counts from the device's counters for that round.  Every stage
 * the runner times (bind, orchestrate, execute, copy back, release) has a
 * column and a field, so a reader can see what of wall the stages leave.
 * A number that does not exist (the later-round mean of a one-round run, the
 * first round of a run stopped before it) is "n/a" in the summary and null
 * in JSON, never a made-up 0.
 *
 * A JSON report goes through an outfile: a tool never finds a truncated
 * file where a report should be, and a failed write keeps the old one.
 */
#include <math.h>
#include <stdio.h>

#include "base/json.h"
#include "base/outfile.h"
#include "scene/report.h"

/* scenes/kernels/kernels.h's: "portable", "avx2" or "avx512bf16", the path the
 * workload kernels take (that header lives beside the scenes, not on the
 * scene runner's include path). */
const char *kern_path(void);

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

void scene_report_summarize(scene_report *r)
{
    double later = 0.0;
    r->first_ms = r->nrounds > 0 ? ms(r->rounds[0].stats.wall_ns) : NAN; /* no round ran */
    for (uint32_t i = 1; i < r->nrounds; i++)
        later += ms(r->rounds[i].stats.wall_ns);
    r->later_avg_ms = r->nrounds > 1 ? later / (r->nrounds - 1) : NAN;
}

/* Left-aligned columns, two spaces apart.  Rows are printed as rounds end,
 * before the widest value is known, so each column is as wide as the values
 * a real run reaches: 99999.999 ms (a round of 100 s) and 99 GB. */
enum { MS_W = 9, BYTES_W = 11 };

void scene_report_print_header_replay(FILE *f, bool replay)
{
    fprintf(f, "round  %-*s  %-*s  %-*s  %-*s  %-*s  %-*s  %-*s  %-*s  %sgolden\n", MS_W, "wall_ms",
            MS_W, "bind_ms", MS_W, "orch_ms", MS_W, "exec_ms", MS_W, "back_ms", MS_W, "rel_ms",
            BYTES_W, "h2d_bytes", BYTES_W, "d2h_bytes", replay ? "replayed  " : "");
}

void scene_report_print_row_replay(FILE *f, uint32_t round, const scene_round *sr, bool replay)
{
    const hg_run_stats *s = &sr->stats;
    const char *replayed = !replay ? "" : s->replayed ? "yes       " : "no        ";
    fprintf(f, "%-5u  %-*.3f  %-*.3f  %-*.3f  %-*.3f  %-*.3f  %-*.3f  %-*llu  %-*llu  %s%s\n",
            round, MS_W, ms(s->wall_ns), MS_W, ms(s->bind_ns), MS_W, ms(s->orch_ns), MS_W,
            ms(s->exec_ns), MS_W, ms(s->copyback_ns), MS_W, ms(s->release_ns), BYTES_W,
            (unsigned long long)s->h2d_bytes, BYTES_W, (unsigned long long)s->d2h_bytes, replayed,
            sr->golden);
}

void scene_report_print_header(FILE *f)
{
    scene_report_print_header_replay(f, false);
}

void scene_report_print_row(FILE *f, uint32_t round, const scene_round *sr)
{
    scene_report_print_row_replay(f, round, sr, false);
}

void scene_report_print_summary(FILE *f, const scene_report *r)
{
    if (isnan(r->first_ms))
        fputs("first round n/a (no round ran)    later rounds avg ", f);
    else
        fprintf(f, "first round %.3f ms    later rounds avg ", r->first_ms);
    if (isnan(r->later_avg_ms))
        fputs("n/a", f);
    else
        fprintf(f, "%.3f ms", r->later_avg_ms);
    fprintf(f, "    overall %.3f ms (case %.3f ms, golden %.3f ms)", r->overall_ms, r->case_ms,
            r->golden_ms);
    if (r->repeat > 1 && r->later.n > 0)
        fprintf(f, "    later rounds median %.3f ms (min %.3f, max %.3f, %u repeats)",
                r->later.median, r->later.min, r->later.max, r->later.n);
    if (r->residency == SCENE_RESIDENCY_PIN)
        fprintf(f, "    setup %.3f ms (%llu bytes)", r->setup_ms,
                (unsigned long long)r->setup_h2d_bytes);
    uint64_t build_ns = 0;
    for (uint32_t i = 0; i < r->nrounds; i++)
        build_ns += r->rounds[i].stats.build_ns;
    if (build_ns > 0) /* the table's orch_ms leaves it out */
        fprintf(f, "    programs built %.3f ms", ms(build_ns));
    if (r->interrupted)
        fprintf(f, "    interrupted after %u round%s", r->nrounds, r->nrounds == 1 ? "" : "s");
    fputc('\n', f);
}

/* Writes `"key": ` so the value can follow. */
static void key(FILE *f, const char *k)
{
    json_write_string(f, k);
    fputs(": ", f);
}

static void write_round(FILE *f, uint32_t round, const scene_round *sr)
{
    const hg_run_stats *s = &sr->stats;
    const struct {
        const char *name;
        double value;
    } fields[] = {
        {"round", round},
        {"wall_ms", ms(s->wall_ns)},
        {"bind_ms", ms(s->bind_ns)},
        {"orch_ms", ms(s->orch_ns)},
        {"exec_ms", ms(s->exec_ns)},
        {"copyback_ms", ms(s->copyback_ns)},
        {"release_ms", ms(s->release_ns)},
        {"h2d_bytes", (double)s->h2d_bytes},
        {"d2h_bytes", (double)s->d2h_bytes},
        {"h2d_copies", (double)s->h2d_copies},
        {"d2h_copies", (double)s->d2h_copies},
        {"h2d_batches", (double)s->h2d_batches},
        {"d2h_batches", (double)s->d2h_batches},
        {"h2d_bytes_skipped", (double)s->h2d_bytes_skipped},
        {"d2h_bytes_skipped", (double)s->d2h_bytes_skipped},
        {"device_allocs", (double)s->device_allocs},
        {"resident_hits", (double)s->resident_hits},
        {"resident_bytes_skipped", (double)s->resident_bytes_skipped},
        {"stale_uploads", (double)s->stale_uploads},
        {"resident_staged", (double)s->resident_staged},
        {"evictions", (double)s->evictions},
        {"h2d_ms", ms(s->h2d_ns)},
        {"d2h_ms", ms(s->d2h_ns)},
        {"replayed", (double)s->replayed},
        {"net_bytes", (double)s->net_bytes}, /* handed to MPI (libhostgraph_mpi) */
        {"net_ms", ms(s->net_ns)},
        {"build_ms", ms(s->build_ns)}, /* programs built for this round (OpenCL), not in orch_ms */
    };
    fputs("{", f);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        key(f, fields[i].name);
        json_write_number(f, fields[i].value);
        fputs(", ", f);
    }
    key(f, "golden");
    json_write_string(f, sr->golden);
    fputs("}", f);
}

/* A named value ("preset": "real") as its name, other params as numbers. */
void scene_report_write_params(FILE *f, const scene *s, const int64_t *params)
{
    fputs("{", f);
    for (uint32_t i = 0; i < s->nparams; i++) {
        fputs(i > 0 ? ", " : "", f);
        key(f, s->params[i].name);
        const char *name = scene_param_value_name(&s->params[i], params[i]);
        if (name != NULL)
            json_write_string(f, name);
        else
            json_write_number(f, (double)params[i]);
    }
    fputs("}", f);
}

/* null, or {"code": -6, "name": "device copy failed", "message": "..."}. */
static void write_error(FILE *f, const hg_err *e)
{
    if (e->code == 0) {
        fputs("null", f);
        return;
    }
    fputs("{", f);
    key(f, "code");
    json_write_number(f, e->code);
    fputs(", ", f);
    key(f, "name");
    json_write_string(f, hg_strerror(e->code));
    fputs(", ", f);
    key(f, "message");
    json_write_string(f, e->msg);
    fputs("}", f);
}

static void write_string_or_null(FILE *f, const char *s)
{
    if (s != NULL)
        json_write_string(f, s);
    else
        fputs("null", f);
}

/* A newline and `indent` spaces, then `"name": `. */
static void field(FILE *f, int indent, const char *name)
{
    fprintf(f, "\n%*s", indent, "");
    key(f, name);
}

void scene_report_write_provenance(FILE *f, int indent)
{
    field(f, indent, "schema");
    json_write_number(f, SCENE_REPORT_SCHEMA);
    fputc(',', f);
    field(f, indent, "hostgraph_version");
    json_write_string(f, HG_VERSION);
    fputc(',', f);
    field(f, indent, "kernels");
    json_write_string(f, kern_path());
    fputc(',', f);
    field(f, indent, "host");
    scene_report_write_host(f);
    fputc(',', f);
}

/* --tp: "tp": N and "ranks": [{"rank": 0, "rounds": [...]}, ...], every
 * rank's own rounds (its own golden verdict), rank 0's among them. */
static void write_ranks(FILE *f, const scene_report *r, int in)
{
    field(f, in, "tp");
    json_write_number(f, r->nranks);
    fputc(',', f);
    field(f, in, "ranks");
    fputs("[", f);
    for (uint32_t k = 0; k < r->nranks; k++) {
        fprintf(f, "\n%*s{", in + 2, "");
        key(f, "rank");
        json_write_number(f, k);
        fputs(", ", f);
        key(f, "device");
        json_write_string(f, r->rank_devices + (size_t)k * SCENE_TP_SPEC);
        fputs(", ", f);
        key(f, "rounds");
        fputs("[", f);
        for (uint32_t i = 0; i < r->nrounds; i++) {
            fprintf(f, "\n%*s", in + 4, "");
            write_round(f, i + 1, &r->rank_rounds[(size_t)k * r->nrounds + i]);
            fputs(i + 1 < r->nrounds ? "," : "", f);
        }
        fprintf(f, "\n%*s]}%s", in + 2, "", k + 1 < r->nranks ? "," : "");
    }
    fprintf(f, "\n%*s],", in, "");
}

void scene_report_write_object(FILE *f, const scene_report *r, int indent)
{
    const int in = indent + 2;
    fputs("{", f);
    scene_report_write_provenance(f, in);
    field(f, in, "scene");
    json_write_string(f, r->scene->name);
    fputc(',', f);
    /* Where the scene was defined: null for a built-in one. */
    field(f, in, "scene_file");
    write_string_or_null(f, r->scene->file);
    fputc(',', f);
    field(f, in, "scene_class");
    write_string_or_null(f, r->scene->cls);
    fputc(',', f);
    field(f, in, "device");
    json_write_string(f, r->device);
    fputc(',', f);
    field(f, in, "residency");
    json_write_string(f, scene_residency_name(r->residency));
    fputs(",", f);
    field(f, in, "verify");
    fputs(r->verify ? "true," : "false,", f);
    field(f, in, "replay");
    fputs(r->replay ? "true," : "false,", f);
    field(f, in, "params");
    scene_report_write_params(f, r->scene, r->params);
    fputc(',', f);
    field(f, in, "rounds");
    fputs("[", f);
    for (uint32_t i = 0; i < r->nrounds; i++) {
        fprintf(f, "\n%*s", in + 2, "");
        write_round(f, i + 1, &r->rounds[i]);
        fputs(i + 1 < r->nrounds ? "," : "", f);
    }
    fprintf(f, "\n%*s],", in, "");
    if (r->nranks > 0)
        write_ranks(f, r, in);
    if (r->residency == SCENE_RESIDENCY_PIN) {
        field(f, in, "setup_ms");
        json_write_number(f, r->setup_ms);
        fputc(',', f);
        field(f, in, "setup_h2d_bytes");
        json_write_number(f, (double)r->setup_h2d_bytes);
        fputc(',', f);
    }
    field(f, in, "case_ms");
    json_write_number(f, r->case_ms);
    fputc(',', f);
    field(f, in, "golden_ms");
    json_write_number(f, r->golden_ms);
    fputc(',', f);
    field(f, in, "first_ms");
    json_write_number(f, r->first_ms);
    fputc(',', f);
    field(f, in, "later_avg_ms");
    json_write_number(f, r->later_avg_ms);
    fputc(',', f);
    field(f, in, "overall_ms");
    json_write_number(f, r->overall_ms);
    fputc(',', f);
    const struct {
        const char *name;
        double value;
    } spread[] = {{"repeat", r->repeat > 0 ? r->repeat : 1},
                  {"warmup", r->warmup},
                  {"later_avg_ms_median", r->later.median},
                  {"later_avg_ms_min", r->later.min},
                  {"later_avg_ms_max", r->later.max}};
    for (size_t i = 0; i < sizeof spread / sizeof spread[0]; i++) {
        field(f, in, spread[i].name);
        json_write_number(f, spread[i].value);
        fputc(',', f);
    }
    if (r->compared) {
        field(f, in, "verdict");
        if (r->verdict != NULL)
            json_write_string(f, r->verdict);
        else
            fputs("null", f);
        fputc(',', f);
    }
    field(f, in, "interrupted");
    fputs(r->interrupted ? "true," : "false,", f);
    field(f, in, "error");
    write_error(f, &r->error);
    fprintf(f, "\n%*s}", indent, "");
}

int scene_report_write_json(const scene_report *r, const char *path)
{
    outfile of;
    char why[256];
    if (outfile_open(&of, path, why, sizeof why) != 0)
        return HG_EIO;
    scene_report_write_object(of.f, r, 0);
    fputc('\n', of.f);
    return outfile_commit(&of, why, sizeof why) == 0 ? 0 : HG_EIO;
}
