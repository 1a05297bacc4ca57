/* What both validation probes share (probe.c, window.c; docs/validation.md): the region they
   walk — a 2 MiB-aligned anonymous mapping of 64-byte lines, advised MADV_HUGEPAGE or
   MADV_NOHUGEPAGE, whose huge pages are read back from /proc/self/smaps — the chase's
   successor through it, a count's parsing and the clocks. */
#ifndef VMMU_PROBES_H
#define VMMU_PROBES_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LINE 64u
#define HUGE_PAGE (2u << 20)

/* The chase's successor: a full-period LCG modulo the line count (Knuth's MMIX constants;
   Hull-Dobell: C odd, A = 1 mod 4, the line count a power of two), so a chase is one cycle
   through every line. */
#define LCG_A 6364136223846793005ull
#define LCG_C 1442695040888963407ull

struct line {
    const struct line *next;
    uint64_t pad[LINE / 8 - 1];
};

/* `footprint` bytes mapped 2 MiB-aligned and advised as `huge` says; the advice's errno (0
   when it was taken) in `*madvise_errno`. Exits with a message naming `who` when the mapping
   fails. */
static struct line *map_region(const char *who, uint64_t footprint, int huge, int *madvise_errno) {
    size_t len = footprint + HUGE_PAGE;
    char *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        fprintf(stderr, "%s: mmap of %zu bytes: %s\n", who, len, strerror(errno));
        exit(1);
    }
    struct line *a =
        (struct line *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~((uintptr_t)HUGE_PAGE - 1));
    *madvise_errno = madvise(a, footprint, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) ? errno : 0;
    return a;
}

/* The line after line `x` of a chase through `lines` lines (a power of two). */
static inline uint64_t chase_successor(uint64_t x, uint64_t lines) {
    return (LCG_A * x + LCG_C) & (lines - 1);
}

/* AnonHugePages (kB) of the mappings that overlap [start, start + len). */
static long anon_huge_kb(uintptr_t start, uintptr_t len) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int inside = 0;
    long kb = 0;
    while (fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        long v;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2)
            inside = lo < start + len && hi > start;
        else if (inside && sscanf(line, "AnonHugePages: %ld kB", &v) == 1)
            kb += v;
    }
    fclose(f);
    return kb;
}

/* `text` as a count with an optional suffix K, M or G (binary when `binary`, else
   decimal) in `*out`; 0 when it is not one (a sign, other characters, an overflow). */
static int parse_count(const char *text, int binary, uint64_t *out) {
    char *end;
    errno = 0;
    uint64_t v = strtoull(text, &end, 10);
    uint64_t unit = 1;
    if (*end) {
        char s = *end++;
        uint64_t k = binary ? 1024 : 1000;
        unit = s == 'K' || s == 'k' ? k : s == 'M' || s == 'm' ? k * k
             : s == 'G' || s == 'g' ? k * k * k : 0;
    }
    if (errno || end == text || *end || unit == 0 || text[0] == '-' || v > UINT64_MAX / unit)
        return 0;
    *out = v * unit;
    return 1;
}

/* `clock`'s time in seconds. */
static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#endif
