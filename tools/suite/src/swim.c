/* Shallow-water stencil in the spirit of SPEC CPU2000 171.swim (Sadourny's finite-difference
 * scheme for the shallow-water equations on an N x N periodic grid, as in the SWIM kernel
 * R. Sadourny wrote and NCAR distributed): fourteen (N+1) x (N+1) arrays of doubles, three
 * sweeps per time step (CALC1: mass fluxes, vorticity, height; CALC2: new velocities and
 * pressure; CALC3: time smoothing), periodic boundaries copied after each sweep.
 *
 * usage: swim N STEPS    prints the checksum of p, u and v after STEPS time steps.
 * Footprint: 14 x (N+1)^2 x 8 bytes (N = 2047: 470 MB; 171.swim's reference grid is 1335).
 * Deterministic: no input but N and STEPS, no randomness. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static long n1; /* row length: N + 1 */
#define AT(a, i, j) a[(long)(i) * n1 + (j)]

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: swim N STEPS\n");
        return 2;
    }
    int n = atoi(argv[1]), steps = atoi(argv[2]);
    if (n < 8 || steps < 1) {
        fprintf(stderr, "swim: N must be >= 8 and STEPS >= 1\n");
        return 2;
    }
    n1 = n + 1;
    double *a[14];
    for (int k = 0; k < 14; k++) {
        a[k] = malloc(sizeof(double) * n1 * n1);
        if (!a[k]) {
            fprintf(stderr, "swim: out of memory for a %d x %d grid\n", n, n);
            return 1;
        }
    }
    double *u = a[0], *v = a[1], *p = a[2], *unew = a[3], *vnew = a[4], *pnew = a[5];
    double *uold = a[6], *vold = a[7], *pold = a[8], *cu = a[9], *cv = a[10], *z = a[11];
    double *h = a[12], *psi = a[13];

    const double dt = 90., dx = 1e5, dy = 1e5, a0 = 1e6, alpha = .001;
    const double pi = 4. * atan(1.), tpi = pi + pi, di = tpi / n, dj = tpi / n;
    const double pcf = pi * pi * a0 * a0 / (1e5 * 1e5 * 10);
    /* Initial values: the stream function and the pressure field of SWIM's INITAL. */
    for (int i = 0; i < n1; i++)
        for (int j = 0; j < n1; j++) {
            AT(psi, i, j) = a0 * sin((i + .5) * di) * sin((j + .5) * dj);
            AT(p, i, j) = pcf * (cos(2. * i * di) + cos(2. * j * dj)) + 50000.;
        }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            AT(u, i + 1, j) = -(AT(psi, i + 1, j + 1) - AT(psi, i + 1, j)) / dy;
            AT(v, i, j + 1) = (AT(psi, i + 1, j + 1) - AT(psi, i, j + 1)) / dx;
        }
    for (int j = 0; j < n; j++) {
        AT(u, 0, j) = AT(u, n, j);
        AT(v, n, j + 1) = AT(v, 0, j + 1);
    }
    for (int i = 0; i < n; i++) {
        AT(u, i + 1, n) = AT(u, i + 1, 0);
        AT(v, i, 0) = AT(v, i, n);
    }
    AT(u, 0, n) = AT(u, n, 0);
    AT(v, n, 0) = AT(v, 0, n);
    for (int i = 0; i < n1; i++)
        for (int j = 0; j < n1; j++) {
            AT(uold, i, j) = AT(u, i, j);
            AT(vold, i, j) = AT(v, i, j);
            AT(pold, i, j) = AT(p, i, j);
        }

    const double fsdx = 4. / dx, fsdy = 4. / dy;
    double tdt = dt;
    for (int step = 0; step < steps; step++) {
        /* CALC1 */
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                AT(cu, i + 1, j) = .5 * (AT(p, i + 1, j) + AT(p, i, j)) * AT(u, i + 1, j);
                AT(cv, i, j + 1) = .5 * (AT(p, i, j + 1) + AT(p, i, j)) * AT(v, i, j + 1);
                AT(z, i + 1, j + 1) = (fsdx * (AT(v, i + 1, j + 1) - AT(v, i, j + 1)) -
                                       fsdy * (AT(u, i + 1, j + 1) - AT(u, i + 1, j))) /
                                      (AT(p, i, j) + AT(p, i + 1, j) + AT(p, i + 1, j + 1) +
                                       AT(p, i, j + 1));
                AT(h, i, j) = AT(p, i, j) + .25 * (AT(u, i + 1, j) * AT(u, i + 1, j) +
                                                   AT(u, i, j) * AT(u, i, j) +
                                                   AT(v, i, j + 1) * AT(v, i, j + 1) +
                                                   AT(v, i, j) * AT(v, i, j));
            }
        for (int j = 0; j < n; j++) {
            AT(cu, 0, j) = AT(cu, n, j);
            AT(cv, n, j + 1) = AT(cv, 0, j + 1);
            AT(z, 0, j + 1) = AT(z, n, j + 1);
            AT(h, n, j) = AT(h, 0, j);
        }
        for (int i = 0; i < n; i++) {
            AT(cu, i + 1, n) = AT(cu, i + 1, 0);
            AT(cv, i, 0) = AT(cv, i, n);
            AT(z, i + 1, 0) = AT(z, i + 1, n);
            AT(h, i, n) = AT(h, i, 0);
        }
        AT(cu, 0, n) = AT(cu, n, 0);
        AT(cv, n, 0) = AT(cv, 0, n);
        AT(z, 0, 0) = AT(z, n, n);
        AT(h, n, n) = AT(h, 0, 0);

        /* CALC2 */
        const double tdts8 = tdt / 8., tdtsdx = tdt / dx, tdtsdy = tdt / dy;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                AT(unew, i + 1, j) =
                    AT(uold, i + 1, j) +
                    tdts8 * (AT(z, i + 1, j + 1) + AT(z, i + 1, j)) *
                        (AT(cv, i + 1, j + 1) + AT(cv, i, j + 1) + AT(cv, i, j) + AT(cv, i + 1, j)) -
                    tdtsdx * (AT(h, i + 1, j) - AT(h, i, j));
                AT(vnew, i, j + 1) =
                    AT(vold, i, j + 1) -
                    tdts8 * (AT(z, i + 1, j + 1) + AT(z, i, j + 1)) *
                        (AT(cu, i + 1, j + 1) + AT(cu, i, j + 1) + AT(cu, i, j) + AT(cu, i + 1, j)) -
                    tdtsdy * (AT(h, i, j + 1) - AT(h, i, j));
                AT(pnew, i, j) = AT(pold, i, j) - tdtsdx * (AT(cu, i + 1, j) - AT(cu, i, j)) -
                                 tdtsdy * (AT(cv, i, j + 1) - AT(cv, i, j));
            }
        for (int j = 0; j < n; j++) {
            AT(unew, 0, j) = AT(unew, n, j);
            AT(vnew, n, j + 1) = AT(vnew, 0, j + 1);
            AT(pnew, n, j) = AT(pnew, 0, j);
        }
        for (int i = 0; i < n; i++) {
            AT(unew, i + 1, n) = AT(unew, i + 1, 0);
            AT(vnew, i, 0) = AT(vnew, i, n);
            AT(pnew, i, n) = AT(pnew, i, 0);
        }
        AT(unew, 0, n) = AT(unew, n, 0);
        AT(vnew, n, 0) = AT(vnew, 0, n);
        AT(pnew, n, n) = AT(pnew, 0, 0);

        /* CALC3: time smoothing, then the new fields become the current ones. */
        if (step > 0) {
            for (int i = 0; i < n1; i++)
                for (int j = 0; j < n1; j++) {
                    AT(uold, i, j) = AT(u, i, j) + alpha * (AT(unew, i, j) - 2. * AT(u, i, j) + AT(uold, i, j));
                    AT(vold, i, j) = AT(v, i, j) + alpha * (AT(vnew, i, j) - 2. * AT(v, i, j) + AT(vold, i, j));
                    AT(pold, i, j) = AT(p, i, j) + alpha * (AT(pnew, i, j) - 2. * AT(p, i, j) + AT(pold, i, j));
                    AT(u, i, j) = AT(unew, i, j);
                    AT(v, i, j) = AT(vnew, i, j);
                    AT(p, i, j) = AT(pnew, i, j);
                }
        } else {
            tdt = tdt + tdt;
            for (int i = 0; i < n1; i++)
                for (int j = 0; j < n1; j++) {
                    AT(uold, i, j) = AT(u, i, j);
                    AT(vold, i, j) = AT(v, i, j);
                    AT(pold, i, j) = AT(p, i, j);
                    AT(u, i, j) = AT(unew, i, j);
                    AT(v, i, j) = AT(vnew, i, j);
                    AT(p, i, j) = AT(pnew, i, j);
                }
        }
    }
    double sp = 0, su = 0, sv = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            sp += AT(p, i, j);
            su += fabs(AT(u, i, j));
            sv += fabs(AT(v, i, j));
        }
    printf("swim n=%d steps=%d p=%.6e u=%.6e v=%.6e\n", n, steps, sp, su, sv);
    for (int k = 0; k < 14; k++) free(a[k]);
    return 0;
}
