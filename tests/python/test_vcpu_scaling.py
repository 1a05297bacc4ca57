"""Seed 004's vCPU-scaling experiment: rows for every workload and vCPU count, verdicts that
can fail, and the explanation naming the exits that grew."""

from vmmu.repro.bhatia09 import vcpus as vcpu_scaling


def test_quick_experiment_gives_rows_verdicts_and_explanations():
    rows = vcpu_scaling.run(quick=True)
    assert {(r["workload"], r["vcpus"]) for r in rows} == {
        (w, n) for w in vcpu_scaling.WORKLOADS for n in vcpu_scaling.VCPUS
    }
    for r in rows:
        assert r["shadow_cycles"] > 0 and r["nested_cycles"] > 0
        assert r["nested_advantage"] == r["shadow_cycles"] / r["nested_cycles"] - 1
    db = {r["vcpus"]: r for r in rows if r["workload"] == "database"}
    assert db[1]["ipis"] == 0 and db[4]["ipis"] > db[2]["ipis"] > 0
    verdicts = vcpu_scaling.verdicts(rows)
    assert [v["workload"] for v in verdicts] == list(vcpu_scaling.WORKLOADS)
    lines = vcpu_scaling.explain(rows)
    assert any("ipi_send" in line for line in lines)


def test_a_shrinking_advantage_fails_the_claim():
    rows = [
        {"workload": w, "vcpus": n, "nested_advantage": adv}
        for w in vcpu_scaling.WORKLOADS
        for n, adv in ((1, 0.5), (2, 0.4), (4, 0.6))
    ]
    assert not any(v["holds"] for v in vcpu_scaling.verdicts(rows))
    rows = [dict(r, nested_advantage=0.1 * r["vcpus"]) for r in rows]
    assert all(v["holds"] for v in vcpu_scaling.verdicts(rows))


def test_the_documented_module_names_still_import():
    import vmmu.adaptive_repro
    import vmmu.vcpu_scaling
    from vmmu.repro.bae11 import adaptive

    assert vmmu.vcpu_scaling.run is vcpu_scaling.run
    assert vmmu.adaptive_repro.bae11_adaptive is adaptive.bae11_adaptive
