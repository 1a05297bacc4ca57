"""An object-graph workload for CPython: OBJECTS records (dicts with strings, numbers and a
list of links to other records) are built from a seeded random generator, then sorted by a
string key, joined with a second table by key, aggregated in a hash table and walked as a
graph from many starts. Everything is deterministic in (OBJECTS, SEED).

usage: python3 objects.py OBJECTS SEED    prints a checksum.
"""

import random
import sys


def main(n: int, seed: int) -> None:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        records.append(
            {
                "id": i,
                "name": format(rng.getrandbits(48), "x"),
                "city": rng.randrange(997),
                "amount": rng.random() * 1000.0,
                "links": [rng.randrange(n) for _ in range(rng.randint(1, 6))],
            }
        )
    by_name = sorted(records, key=lambda r: r["name"])
    cities = {c: {"city": c, "tax": (c * 7919) % 101 / 1000.0} for c in range(997)}
    joined = [(r["id"], r["amount"] * (1.0 + cities[r["city"]]["tax"])) for r in by_name]
    totals: dict[int, float] = {}
    for r in records:
        totals[r["city"]] = totals.get(r["city"], 0.0) + r["amount"]
    reached = 0
    for start in range(0, n, max(1, n // 200)):
        seen = {start}
        frontier = [start]
        for _ in range(3):
            nxt = []
            for k in frontier:
                for j in records[k]["links"]:
                    if j not in seen:
                        seen.add(j)
                        nxt.append(j)
            frontier = nxt
        reached += len(seen)
    check = sum(a for _, a in joined[:1000]) + sum(totals.values()) + reached
    print(f"objects n={n} seed={seed} first={by_name[0]['name']} check={check:.6f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python3 objects.py OBJECTS SEED")
    main(int(sys.argv[1]), int(sys.argv[2]))
