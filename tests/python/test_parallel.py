"""Independent runs in parallel (the engine releases the GIL while it simulates, so the modes of
a comparison run on all cores at once) give exactly the results of the same runs one after
another."""

from __future__ import annotations

import vmmu


def _without_timing(d: object) -> object:
    if isinstance(d, dict):
        return {
            k: _without_timing(v) for k, v in d.items() if k not in ("seconds", "events_per_second")
        }
    if isinstance(d, list):
        return [_without_timing(v) for v in d]
    return d


def test_parallel_modes_give_the_serial_results():
    # Threads share nothing but the interpreter: each run must depend on its inputs only.
    spec = "pointer-chase:footprint=256M,refs=200K"
    modes = ["native", "nested", "shadow"]
    par = vmmu.api.run_modes(modes, parallel=True, workload=spec)
    ser = vmmu.api.run_modes(modes, parallel=False, workload=spec)
    assert list(par) == modes
    for m in modes:
        assert _without_timing(dict(par[m])) == _without_timing(dict(ser[m])), m


def test_a_reproduction_gives_the_same_table_on_one_worker_and_on_several():
    from vmmu import repro

    one = repro.reproduce("levasseur", quick=True, workers=1)
    several = repro.reproduce("levasseur", quick=True, workers=3)
    assert one.rows == several.rows
    assert one.views == several.views
