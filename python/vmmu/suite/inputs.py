"""The suite's input generators: each writes one entry's input into a directory,
deterministically from its parameters (a seed among them), and returns nothing. An entry
names the generators it needs (:attr:`vmmu.suite.entries.Entry.inputs`); each is called with
the parameters of the entry's scale that its signature names, and the source text of the
function is part of the entry's cache key, so a changed generator never reuses an old input.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

#: pgbench's rows per scale unit: 1 branch, 10 tellers, 100,000 accounts.
_TELLERS_PER_BRANCH = 10
_ACCOUNTS_PER_BRANCH = 100_000


def tpcb_database(out: Path, accounts: int) -> None:
    """``tpcb.db``: pgbench's four tables (``pgbench -i``'s schema and row widths: an account
    row is its id, branch, balance and an 84-character filler) with ``accounts`` accounts, one
    branch per 100,000 accounts and ten tellers per branch, written by the ``sqlite3``
    program itself (natively, not recorded)."""
    branches = max(1, accounts // _ACCOUNTS_PER_BRANCH)
    sql = f"""
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
CREATE TABLE pgbench_branches (bid INTEGER PRIMARY KEY, bbalance INTEGER, filler CHAR(88));
CREATE TABLE pgbench_tellers (tid INTEGER PRIMARY KEY, bid INTEGER, tbalance INTEGER,
                              filler CHAR(84));
CREATE TABLE pgbench_accounts (aid INTEGER PRIMARY KEY, bid INTEGER, abalance INTEGER,
                               filler CHAR(84));
CREATE TABLE pgbench_history (tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER,
                              mtime TEXT, filler CHAR(22));
BEGIN;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < {branches})
INSERT INTO pgbench_branches SELECT x, 0, NULL FROM n;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n
                        WHERE x < {branches * _TELLERS_PER_BRANCH})
INSERT INTO pgbench_tellers SELECT x, (x - 1) / {_TELLERS_PER_BRANCH} + 1, 0, NULL FROM n;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < {accounts})
INSERT INTO pgbench_accounts
  SELECT x, (x - 1) / {_ACCOUNTS_PER_BRANCH} + 1, 0, printf('%84s', '') FROM n;
COMMIT;
"""
    db = out / "tpcb.db"
    db.unlink(missing_ok=True)
    subprocess.run(["sqlite3", str(db)], input=sql, text=True, check=True, capture_output=True)


def tpcb_transactions(out: Path, accounts: int, txns: int, seed: int) -> None:
    """``txns.sql``: the session's settings (a 1 GiB page cache, write-ahead logging, no
    memory-mapped I/O, so every page goes through the cache), a scan that reads the accounts
    table into the cache, and ``txns`` transactions of
    pgbench's built-in TPC-B-like script, its random draws (account, teller, branch, delta in
    [-5000, 5000]) taken from ``random.Random(seed)``."""
    branches = max(1, accounts // _ACCOUNTS_PER_BRANCH)
    rng = random.Random(seed)
    lines = [
        "PRAGMA cache_size = -1048576;",
        "PRAGMA mmap_size = 0;",
        "PRAGMA journal_mode = WAL;",
        "PRAGMA synchronous = NORMAL;",
        # Warm the buffer pool as a running server's is: count(*) reads every page of the
        # accounts table into the page cache.
        "SELECT count(*) FROM pgbench_accounts;",
    ]
    for i in range(txns):
        aid = rng.randint(1, accounts)
        tid = rng.randint(1, branches * _TELLERS_PER_BRANCH)
        bid = rng.randint(1, branches)
        delta = rng.randint(-5000, 5000)
        lines += [
            "BEGIN;",
            f"UPDATE pgbench_accounts SET abalance = abalance + {delta} WHERE aid = {aid};",
            f"SELECT abalance FROM pgbench_accounts WHERE aid = {aid};",
            f"UPDATE pgbench_tellers SET tbalance = tbalance + {delta} WHERE tid = {tid};",
            f"UPDATE pgbench_branches SET bbalance = bbalance + {delta} WHERE bid = {bid};",
            f"INSERT INTO pgbench_history VALUES ({tid}, {bid}, {aid}, {delta}, "
            f"'2008-03-01 00:00:{i % 60:02d}', NULL);",
            "COMMIT;",
        ]
    (out / "txns.sql").write_text("\n".join(lines) + "\n")


def text_corpus(out: Path, kb: int, seed: int) -> None:
    """``corpus.txt``: ``kb`` KiB of text — lines of words drawn from a 20,000-word vocabulary
    with a Zipf-like skew, with numbers and punctuation — from ``random.Random(seed)``."""
    rng = random.Random(seed)
    alphabet = "etaoinshrdlcumwfgypbvkjxqz"
    vocab = [
        "".join(alphabet[min(int(rng.expovariate(0.25)), 25)] for _ in range(rng.randint(1, 11)))
        for _ in range(20_000)
    ]
    weights = [1.0 / (k + 1) for k in range(len(vocab))]
    target = kb << 10
    with open(out / "corpus.txt", "w", encoding="ascii") as f:
        written = 0
        while written < target:
            words = rng.choices(vocab, weights, k=4096)
            for i in range(0, len(words), 97):
                words[i] = f"{rng.randrange(100_000)}."
            chunk = "\n".join(" ".join(words[i : i + 12]) for i in range(0, len(words), 12)) + "\n"
            f.write(chunk[: target - written])
            written += min(len(chunk), target - written)


def c_unit(out: Path, functions: int, seed: int) -> None:
    """``unit.c``: one translation unit of ``functions`` functions, each with a struct type,
    loops over arrays, a switch, arithmetic a compiler optimizes (constants to fold,
    invariants to hoist, loops to unroll and vectorize) and calls to earlier functions, from
    ``random.Random(seed)``."""
    rng = random.Random(seed)
    parts = ["#include <stddef.h>\n#include <string.h>\n"]
    for f in range(functions):
        fields = rng.randint(3, 8)
        parts.append(f"struct s{f} {{ " + " ".join(f"long f{k};" for k in range(fields)) + " };\n")
        body = []
        for b in range(rng.randint(3, 7)):
            kind = rng.randrange(4)
            if kind == 0:
                body.append(
                    f"  for (size_t i = 0; i < n; i++) acc += a[i] * {rng.randint(2, 99)} "
                    f"+ (a[(i + {b}) % n] >> {rng.randint(1, 7)});\n"
                )
            elif kind == 1:
                cases = "".join(
                    f"    case {c}: acc ^= p->f{c % fields} + {rng.randint(1, 1000)}; break;\n"
                    for c in range(rng.randint(4, 12))
                )
                body.append(f"  switch (acc & 15) {{\n{cases}    default: acc += n;\n  }}\n")
            elif kind == 2 and f > 0:
                g = rng.randrange(f)
                body.append(
                    f"  {{ struct s{g} q; memset(&q, 0, sizeof q); acc += g{g}(&q, a, n); }}\n"
                )
            else:
                body.append(
                    f"  for (size_t i = 1; i < n; i++) a[i] = a[i - 1] * {rng.randint(3, 17)} "
                    f"+ p->f{rng.randrange(fields)};\n"
                )
        parts.append(
            f"long g{f}(struct s{f} *p, long *a, size_t n) {{\n  long acc = {rng.randint(0, 99)};\n"
            + "".join(body)
            + f"  p->f0 = acc;\n  return acc + p->f{fields - 1};\n}}\n"
        )
    (out / "unit.c").write_text("".join(parts))
