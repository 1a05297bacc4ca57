/* Blocked dense matrix multiply, C = A x B in double precision: A is M x N, B is N x N, C is
 * M x N, row-major. The loops are tiled in blocks of BS x BS (i, k, j order inside a tile) as
 * a cache-blocked DGEMM is; B, the large operand (N^2 x 8 bytes: N = 6144 is 288 MiB), is read
 * tile by tile for every block of BS rows of A, so each tile's BS rows, N x 8 bytes apart, lie
 * on BS different pages. Deterministic: the matrices are filled from a fixed formula.
 *
 * usage: dgemm N M [BS]    prints the checksum of C. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: dgemm N M [BS]\n");
        return 2;
    }
    long n = atol(argv[1]), m = atol(argv[2]), bs = argc == 4 ? atol(argv[3]) : 64;
    if (n < 1 || m < 1 || bs < 1) {
        fprintf(stderr, "dgemm: N, M and BS must be positive\n");
        return 2;
    }
    double *a = malloc(sizeof(double) * m * n), *b = malloc(sizeof(double) * n * n);
    double *c = calloc((size_t)(m * n), sizeof(double));
    if (!a || !b || !c) {
        fprintf(stderr, "dgemm: out of memory for N = %ld, M = %ld\n", n, m);
        return 1;
    }
    for (long i = 0; i < m; i++)
        for (long k = 0; k < n; k++) a[i * n + k] = (double)((i * 7 + k * 3) % 17) / 17.0;
    for (long k = 0; k < n; k++)
        for (long j = 0; j < n; j++) b[k * n + j] = (double)((k * 5 + j * 11) % 23) / 23.0;
    for (long ii = 0; ii < m; ii += bs)
        for (long kk = 0; kk < n; kk += bs)
            for (long jj = 0; jj < n; jj += bs) {
                long ie = ii + bs < m ? ii + bs : m, ke = kk + bs < n ? kk + bs : n;
                long je = jj + bs < n ? jj + bs : n;
                for (long i = ii; i < ie; i++)
                    for (long k = kk; k < ke; k++) {
                        double aik = a[i * n + k];
                        double *restrict ci = c + i * n, *restrict bk = b + k * n;
                        for (long j = jj; j < je; j++) ci[j] += aik * bk[j];
                    }
            }
    double s = 0;
    for (long i = 0; i < m * n; i++) s += c[i];
    printf("dgemm n=%ld m=%ld bs=%ld sum=%.9e\n", n, m, bs, s);
    free(a);
    free(b);
    free(c);
    return 0;
}
