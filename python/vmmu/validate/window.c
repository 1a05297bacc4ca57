/* vmmu's window probe: how many instructions this core keeps in flight behind a load that
   missed, measured the way Henry Wong measured reorder buffers and register files
   ("Measuring reorder buffer capacity", 2013) (docs/validation.md).

   Two independent pointer chases through a region far larger than the caches, one load of
   each per iteration, each load followed by `gap` filler instructions:

       p = *p;  gap × filler;  q = *q;  gap × filler;

   The load of q enters the window gap + 1 instructions after the load of p.  While both fit
   (gap + 2 <= window) the two misses overlap and an iteration costs one memory latency; once
   they do not, q's load waits for p's to retire and an iteration costs two.  The gap at which
   the time doubles is the window the filler meets first:
     nop  the reorder buffer (a NOP takes an entry and nothing else);
     mov  the integer registers (`mov $1, %r8`: an entry and a register, no flags);
     cmp  the flags registers (`cmp %r8, %r9`: an entry and a flags register).
   A core whose reorder buffer is halved while a second hardware thread runs (simultaneous
   multithreading partitions it) shows the step at half the window for the share of the time
   its sibling is busy, which `vmmu validate host` reads from the same samples.

   usage: window --footprint BYTES --pages 4k|2m --iterations N --reps R [--filler nop|mov|cmp]

   Every gap of GAPS below is timed R times, in an order shuffled anew each round (a fixed
   generator, so runs are comparable), N iterations per sample, by the thread's CPU clock.
   Output: one JSON object on stdout with the gaps and, per gap, its R samples in ns per
   iteration. x86-64 only (the loop is written in assembly so the compiler keeps the NOPs). */
#define _GNU_SOURCE
#include <time.h>

#include "probes.h"

#if !defined(__x86_64__)
#error "the window probe is written for x86-64"
#endif

typedef void (*pair_loop)(const struct line **, const struct line **, uint64_t);

/* One timed loop per filler and gap: `it` iterations of the two loads, each followed by `n`
   copies of `insn`. */
#define PAIR_LOOP(name, n, insn)                                                            \
    static void name##_##n(const struct line **pp, const struct line **qq, uint64_t it) {   \
        const struct line *p = *pp, *q = *qq;                                               \
        __asm__ volatile("1:\n\tmov (%0), %0\n\t.rept " #n "\n\t" insn "\n\t.endr\n\t"      \
                         "mov (%1), %1\n\t.rept " #n "\n\t" insn "\n\t.endr\n\t"            \
                         "dec %2\n\tjnz 1b\n"                                               \
                         : "+r"(p), "+r"(q), "+r"(it)                                       \
                         :                                                                  \
                         : "memory", "cc", "r8", "r9");                                     \
        *pp = p;                                                                            \
        *qq = q;                                                                            \
    }
#define NOP_LOOP(n) PAIR_LOOP(nop, n, "nop")
#define MOV_LOOP(n) PAIR_LOOP(mov, n, "mov $1, %%r8")
#define CMP_LOOP(n) PAIR_LOOP(cmp, n, "cmp %%r8, %%r9")

/* Gaps 8 to 640 in steps of 8: past the largest window of any preset (Golden Cove's 512). */
#define GAPS(X)                                                                             \
    X(8) X(16) X(24) X(32) X(40) X(48) X(56) X(64) X(72) X(80) X(88) X(96) X(104) X(112)    \
    X(120) X(128) X(136) X(144) X(152) X(160) X(168) X(176) X(184) X(192) X(200) X(208)     \
    X(216) X(224) X(232) X(240) X(248) X(256) X(264) X(272) X(280) X(288) X(296) X(304)     \
    X(312) X(320) X(328) X(336) X(344) X(352) X(360) X(368) X(376) X(384) X(392) X(400)     \
    X(408) X(416) X(424) X(432) X(440) X(448) X(456) X(464) X(472) X(480) X(488) X(496)     \
    X(504) X(512) X(520) X(528) X(536) X(544) X(552) X(560) X(568) X(576) X(584) X(592)     \
    X(600) X(608) X(616) X(624) X(632) X(640)

GAPS(NOP_LOOP)
GAPS(MOV_LOOP)
GAPS(CMP_LOOP)
#define NOP_OF(n) nop_##n,
#define MOV_OF(n) mov_##n,
#define CMP_OF(n) cmp_##n,
#define GAP_OF(n) n,
static const pair_loop nop_loops[] = {GAPS(NOP_OF)};
static const pair_loop mov_loops[] = {GAPS(MOV_OF)};
static const pair_loop cmp_loops[] = {GAPS(CMP_OF)};
static const unsigned gaps[] = {GAPS(GAP_OF)};
#define NGAPS (sizeof gaps / sizeof *gaps)

static void usage(const char *why) {
    fprintf(stderr,
            "window: %s\nusage: window --footprint BYTES --pages 4k|2m --iterations N "
            "--reps R [--filler nop|mov|cmp]\n",
            why);
    exit(2);
}

static uint64_t parse_count_option(const char *name, const char *text) {
    uint64_t v;
    if (!parse_count(text, 1, &v) || v == 0) {
        char why[160];
        snprintf(why, sizeof why, "%s: `%s` is not a positive count", name, text);
        usage(why);
    }
    return v;
}


static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int main(int argc, char **argv) {
    uint64_t footprint = 0, iterations = 0, reps = 0;
    int huge = -1;
    const pair_loop *loops = nop_loops;
    const char *filler = "nop";
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage("every option takes a value");
        if (!strcmp(k, "--footprint")) footprint = parse_count_option(k, v);
        else if (!strcmp(k, "--iterations")) iterations = parse_count_option(k, v);
        else if (!strcmp(k, "--reps")) reps = parse_count_option(k, v);
        else if (!strcmp(k, "--filler")) {
            if (!strcmp(v, "nop")) loops = nop_loops;
            else if (!strcmp(v, "mov")) loops = mov_loops;
            else if (!strcmp(v, "cmp")) loops = cmp_loops;
            else usage("--filler: nop, mov or cmp");
            filler = v;
        } else if (!strcmp(k, "--pages")) {
            if (strcmp(v, "4k") && strcmp(v, "2m")) usage("--pages: 4k or 2m");
            huge = !strcmp(v, "2m");
        } else {
            char why[160];
            snprintf(why, sizeof why, "unknown option `%s`", k);
            usage(why);
        }
    }
    if (!footprint || !iterations || !reps || huge < 0)
        usage("--footprint, --pages, --iterations and --reps are required");
    if (footprint < HUGE_PAGE || (footprint & (footprint - 1)))
        usage("--footprint: a power of two of at least 2M");

    int madvise_errno;
    struct line *a = map_region("window", footprint, huge, &madvise_errno);
    /* One cycle through every line; q starts half the cycle ahead of p, and both advance one
       line per iteration, so they never meet. */
    uint64_t lines = footprint / LINE;
    for (uint64_t x = 0; x < lines; x++) a[x].next = &a[chase_successor(x, lines)];
    const struct line *p = &a[0], *q = &a[0];
    for (uint64_t i = 0; i < lines / 2; i++) q = q->next;

    static double ns[NGAPS][64];
    if (reps > 64) usage("--reps: at most 64");
    unsigned order[NGAPS];
    uint64_t state = 88172645463325252ull;
    loops[0](&p, &q, iterations); /* warm the TLBs and the loop */
    for (uint64_t r = 0; r < reps; r++) {
        for (unsigned k = 0; k < NGAPS; k++) order[k] = k;
        for (unsigned k = NGAPS - 1; k > 0; k--) {
            unsigned j = xorshift(&state) % (k + 1), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        for (unsigned kk = 0; kk < NGAPS; kk++) {
            unsigned k = order[kk];
            loops[k](&p, &q, iterations / 8 + 1);
            double c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
            loops[k](&p, &q, iterations);
            ns[k][r] = (seconds(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e9 / (double)iterations;
        }
    }

    printf("{\"filler\": \"%s\", \"footprint\": %" PRIu64 ", \"pages\": \"%s\", "
           "\"iterations\": %" PRIu64 ", \"reps\": %" PRIu64 ", \"anon_huge_kb\": %ld, "
           "\"region_kb\": %" PRIu64 ", \"madvise_errno\": %d, \"checksum\": %" PRIu64
           ", \"gaps\": [",
           filler, footprint, huge ? "2m" : "4k", iterations, reps,
           anon_huge_kb((uintptr_t)a, footprint), footprint / 1024, madvise_errno,
           (uint64_t)(((uintptr_t)p ^ (uintptr_t)q) / LINE));
    for (unsigned k = 0; k < NGAPS; k++) printf("%s%u", k ? ", " : "", gaps[k]);
    printf("], \"ns\": [");
    for (unsigned k = 0; k < NGAPS; k++) {
        printf("%s[", k ? ", " : "");
        for (uint64_t r = 0; r < reps; r++) printf("%s%.2f", r ? ", " : "", ns[k][r]);
        printf("]");
    }
    printf("]}\n");
    return 0;
}
