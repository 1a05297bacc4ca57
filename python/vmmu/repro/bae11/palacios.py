"""The Palacios VM of seed 001, as every bae11 experiment configures it: the guest, its shadow
pager and its nested tables (the static runs of :mod:`vmmu.repro.bae11` and the adaptive runs
of :mod:`vmmu.repro.bae11.adaptive` share them)."""

from __future__ import annotations

#: The Palacios guest of seed 001 §4: a single-core 32-bit guest (2-level page tables).
PALACIOS_GUEST = {"guest.format": "x86_32", "guest.memory": "1G"}

#: Palacios' shadow paging with caching (seed 001 §2): shadow roots cached per CR3 (the
#: default 4 roots), none of the refinements of Xen and KVM — no out-of-sync pages, no
#: prefetch, no write-flood unshadowing.
PALACIOS_SHADOW = {
    "hypervisor.shadow.unsync": False,
    "hypervisor.shadow.prefetch": 0,
    "hypervisor.shadow.write_flood": 0,
}

#: "our nested paging implementation can use large pages at the nested level" (seed 001 §4).
PALACIOS_NESTED = {"host.nested_page_size": "2M"}
