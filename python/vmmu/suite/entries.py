"""The suite's entries, as data: each a real program, its workload class, the Debian packages
it needs, the input the suite generates for it and the two scales of that input.

An entry is run by one of two drivers (:mod:`vmmu.suite.driver`): a :class:`Batch` program
recorded from start to end, or a :class:`Server` recorded while a load generator in the
suite's own process drives it over a socket. Command lines are templates: ``{build}`` (the
entry's compiled sources), ``{inputs}`` (its generated inputs), ``{work}`` (a scratch
directory the run may write), ``{port}`` (a free TCP port, servers) and the scale's
parameters by name.

Sizes come from the class and the machine, never from a paper's figure: ``full`` gives each
program the footprint of its class (a gigabyte buffer pool or heap, hundreds of megabytes of
grid or matrix) as far as a trace of a few billion references allows — the budget that keeps
the whole suite's recording under two hours and each replay under ten minutes per paging mode
on a 2-core machine (docs/workloads.md, "The recorded suite"); ``small`` is the same program
on an input that runs in seconds under the recorder, for the tests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

#: The workload classes of seed 002's Table 1 (Bhargava et al., ASPLOS 2008), in its order.
CLASSES: tuple[str, ...] = ("MiscServer", "WebServer", "JavaServer", "IntCpu", "FpCpu")

#: The scales every entry has; they change only the size of the input.
SCALES: tuple[str, ...] = ("small", "full")


@dataclass(frozen=True)
class Batch:
    """A program recorded from its start to its exit. ``stdin`` (a template) is a file fed to
    it; its stdout goes to the run's log. ``follow_children`` records forked children too (a
    compiler driver's ``cc1`` and ``as``). ``fresh`` names input files copied into ``{work}``
    before each run, for programs that change their input (a database file)."""

    argv: tuple[str, ...]
    stdin: str | None = None
    follow_children: bool = False
    fresh: tuple[str, ...] = ()


@dataclass(frozen=True)
class Server:
    """A server recorded while the suite's load generator ``load`` (a function of
    :mod:`vmmu.suite.load`, by name) drives it through ``{port}`` from outside the recording;
    the load generator ends by asking the server to shut down, which ends the recording."""

    argv: tuple[str, ...]
    load: str


@dataclass(frozen=True)
class Build:
    """Sources under ``tools/suite/src`` compiled into ``{build}`` by ``argv`` (a template that
    may name ``{src}``, the sources' directory)."""

    sources: tuple[str, ...]
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    """One program of the suite. ``inputs`` names the generators of :mod:`vmmu.suite.inputs`
    that write its input into ``{inputs}`` (each called with the scale's parameters it
    names); ``footprint`` is the expected footprint in bytes, an arithmetic expression over the
    scale's parameters; ``packages`` are Debian's, ``programs`` the executables they must put
    on ``PATH``."""

    name: str
    cls: str
    what: str
    leaves_out: str
    packages: tuple[str, ...]
    programs: tuple[str, ...]
    run: Batch | Server
    scales: dict[str, dict[str, int]]
    footprint: str
    inputs: tuple[str, ...] = ()
    build: Build | None = None
    notes: tuple[str, ...] = field(default=())

    def params(self, scale: str) -> dict[str, int]:
        """The parameters of ``scale`` (``small`` or ``full``)."""
        if scale not in self.scales:
            raise ValueError(
                f"suite entry `{self.name}`: no scale `{scale}` (scales: {', '.join(SCALES)})"
            )
        return dict(self.scales[scale])

    def expected_footprint(self, scale: str) -> int:
        """The footprint the entry's definition expects at ``scale``, in bytes."""
        return int(
            eval(self.footprint, {"__builtins__": {"min": min, "max": max}}, self.params(scale))
        )


def _jvm(*flags: str) -> Batch:
    """``Txn`` (tools/suite/src/Txn.java) on OpenJDK in a 1 GiB heap with the serial collector,
    with ``flags`` besides; ``-Xshare:off`` loads the classes from the modules rather than a
    class-data archive whose presence depends on the installation."""
    return Batch(
        argv=(
            "java",
            "-Xms1g",
            "-Xmx1g",
            "-XX:+UseSerialGC",
            *flags,
            "-Xshare:off",
            "-cp",
            "{build}",
            "Txn",
            "{warehouses}",
            "{txns}",
            "{seed}",
        )
    )


JVM_TXN = Entry(
    name="jvm-txn",
    cls="JavaServer",
    what="OpenJDK 17 running a SPECjbb-like transaction loop (TPC-C's new order, payment, "
    "order status, delivery, stock level) over `warehouses` warehouses in a 1 GiB heap "
    "(serial collector, JIT on)",
    leaves_out="SPECjbb's many driver threads and its timed ramp; the JVM's start-up and "
    "just-in-time compilation are in the trace",
    packages=("openjdk-17-jdk-headless",),
    programs=("java", "javac"),
    build=Build(sources=("Txn.java",), argv=("javac", "-d", "{build}", "{src}/Txn.java")),
    run=_jvm(),
    scales={
        "small": {"warehouses": 1, "txns": 2_000, "seed": 1},
        "full": {"warehouses": 8, "txns": 200_000, "seed": 1},
    },
    footprint="warehouses * 12 * 1048576 + txns * 400 + 64 * 1048576",
)

JVM_TXN_THP = dataclasses.replace(
    JVM_TXN,
    name="jvm-txn-thp",
    what="jvm-txn with -XX:+UseTransparentHugePages (the heap madvised for transparent huge pages)",
    leaves_out="as jvm-txn",
    run=_jvm("-XX:+UseTransparentHugePages"),
)


ENTRIES: tuple[Entry, ...] = (
    Entry(
        name="sqlite-tpcb",
        cls="MiscServer",
        what="SQLite running pgbench's TPC-B-like transaction (three balance updates, a read "
        "and a history insert per transaction) on a database of `accounts` rows, with a 1 GiB "
        "page cache (its buffer pool), write-ahead logging and random account ids",
        leaves_out="a client/server database (no network, one connection, no lock "
        "contention between sessions); seed 002's MiscServer also holds SAP, messaging and "
        "terminal services",
        packages=("sqlite3",),
        programs=("sqlite3",),
        run=Batch(
            argv=("sqlite3", "{work}/tpcb.db"), stdin="{inputs}/txns.sql", fresh=("tpcb.db",)
        ),
        scales={
            "small": {"accounts": 100_000, "txns": 1_000, "seed": 1},
            "full": {"accounts": 8_000_000, "txns": 10_000, "seed": 1},
        },
        footprint="accounts * 105 + txns * 200",
        inputs=("tpcb_database", "tpcb_transactions"),
    ),
    Entry(
        name="redis",
        cls="WebServer",
        what="Redis serving a key-value load from a client outside the recording: `keys` "
        "values of `value` bytes written in MSET batches, then `ops` GETs and SETs (9 to 1) "
        "on keys drawn from a Zipf law (alpha 0.99), 32 requests per pipeline",
        leaves_out="HTTP, TLS and file serving of SPECweb; many concurrent connections",
        packages=("redis-server",),
        programs=("redis-server",),
        run=Server(
            argv=(
                "redis-server",
                "--port",
                "{port}",
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                "{work}",
            ),
            load="redis_kv",
        ),
        scales={
            "small": {"keys": 20_000, "value": 256, "ops": 20_000, "seed": 1},
            "full": {"keys": 600_000, "value": 512, "ops": 300_000, "seed": 1},
        },
        footprint="keys * (value + 96)",
    ),
    JVM_TXN,
    JVM_TXN_THP,
    Entry(
        name="gcc",
        cls="IntCpu",
        what="gcc -O2 compiling one generated translation unit of `functions` functions "
        "(loops, switches, structs, calls between them): the driver, cc1 and as",
        leaves_out="403.gcc's nine preprocessed inputs of real code",
        packages=("gcc",),
        programs=("gcc",),
        run=Batch(
            argv=("gcc", "-O2", "-c", "-o", "{work}/unit.o", "{inputs}/unit.c"),
            follow_children=True,
        ),
        scales={"small": {"functions": 2, "seed": 1}, "full": {"functions": 40, "seed": 1}},
        footprint="functions * 60000 + 24 * 1048576",
        inputs=("c_unit",),
    ),
    Entry(
        name="xz",
        cls="IntCpu",
        what="xz -9 (LZMA2, a 64 MiB dictionary searched by binary trees, bt4) compressing "
        "`kb` KiB of generated text, one thread",
        leaves_out="SPECint's compressors (401.bzip2) run on several inputs and also decompress",
        packages=("xz-utils",),
        programs=("xz",),
        run=Batch(argv=("xz", "-9", "-T1", "-c", "{inputs}/corpus.txt")),
        scales={"small": {"kb": 128, "seed": 1}, "full": {"kb": 1024, "seed": 1}},
        footprint="kb * 1024 * 9 + 64 * 1048576",
        inputs=("text_corpus",),
    ),
    Entry(
        name="python",
        cls="IntCpu",
        what="CPython building and querying an object graph of `objects` records (dicts, "
        "lists, strings; a sort, a join by key, a hash aggregation, a graph walk)",
        leaves_out="400.perlbench's interpreter workloads are Perl, on mail and text",
        packages=("python3",),
        programs=("/usr/bin/python3",),
        run=Batch(argv=("/usr/bin/python3", "{src}/objects.py", "{objects}", "{seed}")),
        scales={
            "small": {"objects": 3_000, "seed": 1},
            "full": {"objects": 80_000, "seed": 1},
        },
        footprint="objects * 600 + 16 * 1048576",
    ),
    Entry(
        name="swim",
        cls="FpCpu",
        what="a shallow-water stencil after 171.swim: fourteen (n+1)^2 grids of doubles, "
        "three sweeps per time step, `steps` steps",
        leaves_out="171.swim's 800 time steps (its loop repeats the same sweeps)",
        packages=("gcc",),
        programs=("gcc",),
        build=Build(
            sources=("swim.c",), argv=("gcc", "-O3", "-o", "{build}/swim", "{src}/swim.c", "-lm")
        ),
        run=Batch(argv=("{build}/swim", "{n}", "{steps}")),
        scales={"small": {"n": 255, "steps": 3}, "full": {"n": 2047, "steps": 3}},
        footprint="14 * (n + 1) ** 2 * 8",
    ),
    Entry(
        name="dgemm",
        cls="FpCpu",
        what="a cache-blocked dense matrix multiply, C (m x n) = A (m x n) x B (n x n), "
        "64 x 64 tiles, B the large operand",
        leaves_out="a full n x n product (2n^3 operations: out of a trace's budget at this n)",
        packages=("gcc",),
        programs=("gcc",),
        build=Build(
            sources=("dgemm.c",), argv=("gcc", "-O3", "-o", "{build}/dgemm", "{src}/dgemm.c")
        ),
        run=Batch(argv=("{build}/dgemm", "{n}", "{m}")),
        scales={"small": {"n": 512, "m": 32}, "full": {"n": 6144, "m": 16}},
        footprint="(n * n + 2 * m * n) * 8",
    ),
)


def by_name(names: list[str] | tuple[str, ...] | None = None) -> list[Entry]:
    """The entries named (all, in the suite's order, when ``names`` is empty); an unknown name
    is a :class:`ValueError` listing the known ones."""
    if not names:
        return list(ENTRIES)
    known = {e.name: e for e in ENTRIES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"unknown suite entr{'y' if len(unknown) == 1 else 'ies'} "
            f"`{', '.join(unknown)}` (entries: {', '.join(known)})"
        )
    return [known[n] for n in names]
