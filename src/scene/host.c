/*
 * host.c: what machine produced a report (its "host" object): the CPU model
 * (/proc/cpuinfo's first "model name", "unknown" elsewhere), the online
 * cores and the physical memory.  Read once per report; nothing is cached.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/json.h"
#include "scene/report.h"

/* The first "model name" of /proc/cpuinfo into model, or "unknown". */
static void cpu_model(char *model, size_t len)
{
    char line[512];
    snprintf(model, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f) != NULL) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || colon == NULL)
            continue;
        colon += strspn(colon + 1, " \t") + 1;
        snprintf(model, len, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    fclose(f);
}

void scene_report_write_host(FILE *f)
{
    char model[256];
    cpu_model(model, sizeof model);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    fputs("{\"cpu\": ", f);
    json_write_string(f, model);
    fputs(", \"cores\": ", f);
    json_write_number(f, (double)(cores > 0 ? cores : 0));
    fputs(", \"memory_bytes\": ", f);
    json_write_number(f, pages > 0 && page > 0 ? (double)pages * (double)page : 0.0);
    fputs("}", f);
}
