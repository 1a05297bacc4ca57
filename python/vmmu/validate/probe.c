/* vmmu's host probe: nanoseconds per access over a large anonymous region, one 64-byte line
   per access, with 4 KiB or 2 MiB pages, as a dependent chase or as independent loads
   (docs/validation.md).  `vmmu validate host` builds it with `gcc -O2`, runs it natively and
   records it with `vmmu record`; the timed loop lies between VMMU_PHASE(1) and
   VMMU_PHASE(2), so the simulation warms up over everything before the first marker and stops
   at the second.

   usage: probe --footprint BYTES --pages 4k|2m --pattern chase|independent|pages --accesses N
                [--warmup N] [--out FILE]

   The footprint is a power of two of at least 2 MiB (suffixes K, M, G are binary).  The region
   is mmap'ed 2 MiB-aligned and advised MADV_NOHUGEPAGE (4k) or MADV_HUGEPAGE (2m); whether the
   kernel gave 2 MiB pages is read back from /proc/self/smaps (AnonHugePages of the region).

   Set-up: one sequential pass writes every line, so both patterns start with every page backed
   and the caches holding the region's end.  The chase: line x holds the address of line
   (A*x + C) mod lines, a linear congruential successor with a full period (Hull-Dobell: C odd,
   A = 1 mod 4, lines a power of two), so the chase is one cycle through every line, with no
   index array.  Independent loads: line x holds its own address.  Pages: a chase through one
   line of every 4 KiB page, page x's line at index x mod 64 within it (so the lines spread
   over the cache's sets), in the same successor's order over the pages: the data stays in
   the caches far longer than the translations stay in the TLB, so its time shows the TLB's
   reach (docs/validation.md, "The host's page size").
   Warm-up: `--warmup` accesses (default a tenth of `--accesses`) of the same loop.
   Timed loop, timed by the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID: on a shared machine the
   time the probe waits for a core is not counted; the wall-clock figure is printed beside it).
   The chase: p = *p.  Independent loads: a xorshift64 generator held in a
   register gives each line index, masked to the line count (an AND, not a `%`: the divider's
   latency is not what is measured); the values loaded are summed.

   Output: one JSON object on stdout, or in FILE with `--out` (a recorded run's output then
   stays apart from its recorder's). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "probes.h"
#include "vmmu.h"

struct options {
    uint64_t footprint, accesses, warmup;
    int huge, chase, pages, warmup_given;
    const char *out;
};

static void usage(const char *why) {
    fprintf(stderr,
            "probe: %s\nusage: probe --footprint BYTES --pages 4k|2m "
            "--pattern chase|independent|pages --accesses N [--warmup N] [--out FILE]\n",
            why);
    exit(2);
}

static uint64_t parse_count_option(const char *name, const char *text, int binary) {
    uint64_t v;
    if (!parse_count(text, binary, &v)) {
        char why[160];
        snprintf(why, sizeof why, "%s: `%s` is not a count", name, text);
        usage(why);
    }
    return v;
}

static struct options parse(int argc, char **argv) {
    struct options o = {0};
    int have_footprint = 0, have_pages = 0, have_pattern = 0, have_accesses = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage("every option takes a value");
        if (!strcmp(k, "--footprint")) {
            o.footprint = parse_count_option(k, v, 1);
            have_footprint = 1;
        } else if (!strcmp(k, "--pages")) {
            if (strcmp(v, "4k") && strcmp(v, "2m")) usage("--pages: 4k or 2m");
            o.huge = !strcmp(v, "2m");
            have_pages = 1;
        } else if (!strcmp(k, "--pattern")) {
            if (strcmp(v, "chase") && strcmp(v, "independent") && strcmp(v, "pages"))
                usage("--pattern: chase, independent or pages");
            o.pages = !strcmp(v, "pages");
            o.chase = o.pages || !strcmp(v, "chase");
            have_pattern = 1;
        } else if (!strcmp(k, "--accesses")) {
            o.accesses = parse_count_option(k, v, 0);
            have_accesses = 1;
        } else if (!strcmp(k, "--warmup")) {
            o.warmup = parse_count_option(k, v, 0);
            o.warmup_given = 1;
        } else if (!strcmp(k, "--out")) {
            o.out = v;
        } else {
            char why[160];
            snprintf(why, sizeof why, "unknown option `%s`", k);
            usage(why);
        }
    }
    if (!have_footprint || !have_pages || !have_pattern || !have_accesses)
        usage("--footprint, --pages, --pattern and --accesses are required");
    if (o.footprint < HUGE_PAGE || (o.footprint & (o.footprint - 1)))
        usage("--footprint: a power of two of at least 2M");
    if (o.accesses == 0) usage("--accesses: at least 1");
    if (!o.warmup_given) o.warmup = o.accesses / 10;
    return o;
}


static const struct line *chase(const struct line *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) p = p->next;
    return p;
}

static uint64_t independent(const struct line *a, uint64_t mask, uint64_t *state, uint64_t n) {
    uint64_t s = *state, sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        sum += (uintptr_t)a[s & mask].next;
    }
    *state = s;
    return sum;
}

int main(int argc, char **argv) {
    struct options o = parse(argc, argv);
    int madvise_errno;
    struct line *a = map_region("probe", o.footprint, o.huge, &madvise_errno);

    uint64_t lines = o.footprint / LINE, mask = lines - 1;
    for (uint64_t x = 0; x < lines; x++)
        a[x].next = o.chase && !o.pages ? &a[chase_successor(x, lines)] : &a[x];
    if (o.pages) {
        uint64_t pages = o.footprint >> 12, per_page = 4096 / LINE;
        for (uint64_t x = 0; x < pages; x++) {
            uint64_t y = chase_successor(x, pages);
            a[x * per_page + x % per_page].next = &a[y * per_page + y % per_page];
        }
    }

    const struct line *p = &a[0];
    uint64_t state = 88172645463325252ull, sum = 0;
    if (o.chase)
        p = chase(p, o.warmup);
    else
        sum = independent(a, mask, &state, o.warmup);

    double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
    VMMU_PHASE(1);
    if (o.chase)
        p = chase(p, o.accesses);
    else
        sum += independent(a, mask, &state, o.accesses);
    VMMU_PHASE(2);
    double t1 = seconds(CLOCK_MONOTONIC), c1 = seconds(CLOCK_THREAD_CPUTIME_ID);

    long huge_kb = anon_huge_kb((uintptr_t)a, o.footprint);
    FILE *out = o.out ? fopen(o.out, "w") : stdout;
    if (!out) {
        fprintf(stderr, "probe: %s: %s\n", o.out, strerror(errno));
        return 1;
    }
    fprintf(out, "{\"footprint\": %" PRIu64 ", \"pages\": \"%s\", \"pattern\": \"%s\", "
           "\"accesses\": %" PRIu64 ", \"warmup\": %" PRIu64 ", \"seconds\": %.9f, "
           "\"cpu_seconds\": %.9f, \"ns_per_access\": %.3f, \"wall_ns_per_access\": %.3f, \"anon_huge_kb\": %ld, \"region_kb\": %" PRIu64 ", "
           "\"madvise_errno\": %d, \"checksum\": %" PRIu64 "}\n",
           o.footprint, o.huge ? "2m" : "4k",
           o.pages ? "pages" : o.chase ? "chase" : "independent", o.accesses,
           o.warmup, t1 - t0, c1 - c0, (c1 - c0) * 1e9 / (double)o.accesses,
           (t1 - t0) * 1e9 / (double)o.accesses, huge_kb,
           o.footprint / 1024, madvise_errno,
           (uint64_t)((uintptr_t)p - (uintptr_t)a) / LINE + sum);
    if (fclose(out)) {
        fprintf(stderr, "probe: %s: %s\n", o.out ? o.out : "stdout", strerror(errno));
        return 1;
    }
    return 0;
}
