"""`make bench-sweep`: what a sweep costs beyond its simulations, and how it scales with workers.

Prints, and writes as JSON (``--json``):

- start-up: the wall time of a sweep of one trivial point (worker process start, imports,
  database creation) — paid once per sweep, not per point;
- per-point overhead, for ``--points`` points of 1M references run by one worker, between the
  second commit and the last: the wall time beyond the engine's, the driver's CPU time
  (receiving results, writing the database: what the sweep takes from the cores) and the
  database write alone, each also as a share of a point (the target is under 5%);
- speed-up: the same 20 points of 200K references with 1 worker and with 2 (and with every
  core, when the machine has more), wall time and ``T(1) / T(N)``, beside the throughput the
  machine gives N CPU-bound processes at that moment (the best speed-up it allows).

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


def timed_sweep(data: dict, workers: int, tmp: Path, name: str) -> tuple[float, list[dict]]:
    """Wall time of a sweep into a new database, and for each committed point, in order:
    its engine time, the wall clock and the driver's own CPU clock at its commit."""
    db = tmp / f"{name}.duckdb"
    marks: list[dict] = []

    def mark(_point, outcome, _done, _todo) -> None:
        marks.append(
            {
                "engine": outcome["wall_seconds"],
                "wall": time.perf_counter(),
                "cpu": time.process_time(),
            }
        )

    t0 = time.perf_counter()
    run_sweep(parse_spec(data), db, workers=workers, on_point=mark)
    return time.perf_counter() - t0, marks


BUSY = "s = 0\nfor i in range(20_000_000): s += i"


def capacity(n: int) -> float:
    """How many CPU-bound processes' worth of work this machine does now with ``n`` running
    at once (``n`` on an idle machine with ``n`` cores; less when others share it)."""
    import subprocess

    def run(k: int) -> float:
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(k)]
        for p in procs:
            p.wait()
        return time.perf_counter() - t0

    return n * run(1) / run(n)


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
    ap.add_argument("--points", type=int, default=8, help="1M-reference points for the overhead")
    ap.add_argument("--scaling-points", type=int, default=20)
    ap.add_argument("--scaling-refs", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each scaling sweep (best)")
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
        startup, _ = timed_sweep(spec(16, 1), 1, tmp, "startup")
        wall, marks = timed_sweep(spec(1_000_000, args.points), 1, tmp, "overhead")
        # Steady state, from the first commit to the last: the worker runs point k+1 while the
        # driver writes point k, so the wall time beyond the engine's is what is not hidden,
        # and the driver's CPU time is what the sweep takes from the cores.
        # The first commit also creates the table's columns (once per database): start at the
        # second.
        later = marks[2:]
        engine = sum(m["engine"] for m in later)
        per_point = engine / len(later)
        wall_over = (marks[-1]["wall"] - marks[1]["wall"] - engine) / len(later)
        cpu_over = (marks[-1]["cpu"] - marks[1]["cpu"]) / len(later)
        with ResultsDB(tmp / "overhead.duckdb") as store:
            rows = store.frame().to_dict(orient="records")
        write_ms = db_write_ms(rows, tmp)
        out["startup_seconds"] = round(startup, 3)
        out["overhead"] = {
            "points": len(marks),
            "refs_per_point": 1_000_000,
            "sweep_wall_seconds": round(wall, 3),
            "engine_seconds_per_point": round(per_point, 3),
            "wall_overhead_seconds_per_point": round(wall_over, 4),
            "wall_overhead_percent_of_point": round(100 * wall_over / per_point, 2),
            "driver_cpu_seconds_per_point": round(cpu_over, 4),
            "driver_cpu_percent_of_point": round(100 * cpu_over / per_point, 2),
            "db_write_ms_per_point": round(write_ms, 2),
            "db_write_percent_of_point": round(100 * write_ms / 1000 / per_point, 2),
        }
        o = out["overhead"]
        print(f"vmmu {__version__}, {cores} cores")
        print(
            f"sweep start-up (worker processes, imports, new database): {startup:.2f} s, "
            "once per sweep"
        )
        print(
            f"{len(marks)} points of 1M references on 1 worker, {per_point:.2f} s each in the "
            "engine; per point, between the second commit and the last:"
        )
        print(
            f"  wall time beyond the engine's: {1000 * wall_over:.1f} ms = "
            f"{o['wall_overhead_percent_of_point']:.2f}% of a point"
        )
        print(
            f"  driver CPU (results, database, progress): {1000 * cpu_over:.1f} ms = "
            f"{o['driver_cpu_percent_of_point']:.2f}%"
        )
        print(f"  database write alone: {write_ms:.1f} ms = {o['db_write_percent_of_point']:.2f}%")
        scaling = {}
        counts = sorted({1, 2, cores})
        for n in counts:
            # The best of --repeat runs: other work on a shared machine only slows a run down.
            scaling[n] = min(
                timed_sweep(spec(args.scaling_refs, args.scaling_points), n, tmp, f"s{n}-{i}")[0]
                for i in range(args.repeat)
            )
        base = scaling[1]
        out["capacity"] = {str(n): round(capacity(n), 2) for n in counts if n > 1}
        out["scaling"] = {
            "points": args.scaling_points,
            "refs_per_point": args.scaling_refs,
            "best_of": args.repeat,
            "wall_seconds": {str(n): round(t, 3) for n, t in scaling.items()},
            "speedup": {str(n): round(base / t, 2) for n, t in scaling.items()},
        }
        for n, c in out["capacity"].items():
            print(
                f"this machine now runs {n} CPU-bound processes at {c:.2f}x the throughput of "
                f"one: the best speed-up {n} workers can show here"
            )
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
