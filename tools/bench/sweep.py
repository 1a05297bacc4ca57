"""`make bench-sweep`: what a sweep costs beyond its simulations, and how it scales with workers.

Prints, and writes as JSON (``--json``):

- start-up: the wall time of a sweep of one trivial point (worker process start, imports,
  database creation) — paid once per sweep, not per point;
- per-point overhead, for ``--points`` points of 1M references run by one worker: the
  driver's CPU time per point (receiving results, writing the database: what the sweep takes
  from the cores), the wall time beyond the engine's per point, and the database write alone,
  each also as a share of a point (the target is under 5%);
- speed-up: the same 20 points of 200K references with 1 worker and with 2 (and with every
  core, when the machine has more), wall time and ``T(1) / T(N)``.

The machine may be shared: run it on an idle machine for figures worth comparing.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from vmmu import __version__
from vmmu.results import missing
from vmmu.sweep import ResultsDB, default_workers, parse_spec, run_sweep
from vmmu.sweep.store import row_of

POINT = "random:footprint=64M,refs={refs}"


def spec(refs: int, points: int) -> dict:
    return {
        "sweep": {"name": f"bench-{points}x{refs}"},
        "base": {"mode": "nested", "workload": POINT.format(refs=refs)},
        "grid": {"seed": list(range(1, points + 1))},
    }


def timed_sweep(data: dict, workers: int, tmp: Path, name: str) -> tuple[float, float, list[dict]]:
    """Wall time and the driver's own CPU time of a sweep into a new database, and its rows.
    (Workers are other processes: the driver's CPU time is what the sweep adds to the
    simulations — starting workers, receiving results, writing the database.)"""
    db = tmp / f"{name}.duckdb"
    t0, c0 = time.perf_counter(), time.process_time()
    run_sweep(parse_spec(data), db, workers=workers)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    with ResultsDB(db) as store:
        rows = store.frame().to_dict(orient="records")
    return wall, cpu, rows


def db_write_ms(rows: list[dict], tmp: Path, repeat: int = 4) -> float:
    """Median time to commit one row into a database that already has its columns (one
    transaction each; the first row of a new database also creates its ~200 columns)."""
    with ResultsDB(tmp / "writes.duckdb", write=True) as store:
        times = []
        for i in range(repeat * len(rows) + 1):
            row = rows[i % len(rows)]
            clean = {k: v for k, v in row.items() if not missing(v)}
            clean["point_key"] = f"w{i}"
            t0 = time.perf_counter()
            store.record(row_of(clean["point_key"], {}, {"status": "ok", "result": clean}))
            times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times[1:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=6, help="1M-reference points for the overhead")
    ap.add_argument("--scaling-points", type=int, default=20)
    ap.add_argument("--scaling-refs", type=int, default=200_000)
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = ap.parse_args()
    cores = default_workers()
    out: dict = {
        "vmmu": __version__,
        "python": platform.python_version(),
        "cores": cores,
    }
    with tempfile.TemporaryDirectory(prefix="vmmu-bench-") as d:
        tmp = Path(d)
        startup, _, _ = timed_sweep(spec(16, 1), 1, tmp, "startup")
        wall, cpu, rows = timed_sweep(spec(1_000_000, args.points), 1, tmp, "overhead")
        engine = sum(r["wall_seconds"] for r in rows)
        per_point = engine / len(rows)
        # The driver writes a point while the worker runs the next, so the wall-time figure
        # can come out at or below zero; the driver's CPU time is what it takes from the cores.
        wall_over = (wall - startup - engine) / len(rows)
        cpu_over = cpu / len(rows)
        write_ms = db_write_ms(rows, tmp)
        out["startup_seconds"] = round(startup, 3)
        out["overhead"] = {
            "points": len(rows),
            "refs_per_point": 1_000_000,
            "sweep_wall_seconds": round(wall, 3),
            "engine_seconds_per_point": round(per_point, 3),
            "driver_cpu_seconds_per_point": round(cpu_over, 4),
            "driver_cpu_percent_of_point": round(100 * cpu_over / per_point, 2),
            "wall_overhead_seconds_per_point": round(wall_over, 4),
            "wall_overhead_percent_of_point": round(100 * wall_over / per_point, 2),
            "db_write_ms_per_point": round(write_ms, 2),
            "db_write_percent_of_point": round(100 * write_ms / 1000 / per_point, 2),
        }
        o = out["overhead"]
        print(f"vmmu {__version__}, {cores} cores")
        print(f"sweep start-up (workers, imports, new database): {startup:.2f} s, once per sweep")
        print(
            f"{len(rows)} points of 1M references on 1 worker, {per_point:.2f} s each in the "
            "engine; per point:"
        )
        print(
            f"  driver CPU (start, results, database): {1000 * cpu_over:.1f} ms = "
            f"{o['driver_cpu_percent_of_point']:.2f}% of a point"
        )
        print(
            f"  wall time beyond the engine's: {1000 * wall_over:.1f} ms = "
            f"{o['wall_overhead_percent_of_point']:.2f}%"
        )
        print(f"  database write alone: {write_ms:.1f} ms = {o['db_write_percent_of_point']:.2f}%")
        scaling = {}
        counts = sorted({1, 2, cores})
        for n in counts:
            wall_n, _, _ = timed_sweep(
                spec(args.scaling_refs, args.scaling_points), n, tmp, f"scale{n}"
            )
            scaling[n] = wall_n
        base = scaling[1]
        out["scaling"] = {
            "points": args.scaling_points,
            "refs_per_point": args.scaling_refs,
            "wall_seconds": {str(n): round(t, 3) for n, t in scaling.items()},
            "speedup": {str(n): round(base / t, 2) for n, t in scaling.items()},
        }
        for n, t in scaling.items():
            print(
                f"{args.scaling_points} points of {args.scaling_refs // 1000}K references, "
                f"{n} worker{'s' if n > 1 else ''}: {t:.2f} s, speed-up {base / t:.2f}x"
            )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
