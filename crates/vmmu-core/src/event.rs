//! The workload event model (DESIGN.md "Workloads").
//!
//! A workload is an ordered stream of [`Event`]s for one guest: memory references and the OS
//! events that change address spaces. Generators, trace readers and the recorder all produce
//! this one type; the simulator consumes it one event at a time, so nothing is ever held whole.
//!
//! Events that name no process apply to the *current* process: the one created by the first
//! `ProcessCreate` (or an implicit pid 1 when a trace has no process events), changed by
//! `Switch`, `Fork` does not switch (the parent keeps running), `Exec` replaces the current image.
//! Within a process, `Thread` names the thread the following events belong to; on several
//! vCPUs the guest scheduler runs threads concurrently (docs/model.md, "vCPUs").

use crate::addr::Gva;
use serde::{Deserialize, Serialize};

/// What a memory reference does (Valgrind lackey's `I`, `L`, `S`, `M`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[repr(u8)]
pub enum AccessKind {
    /// A data load.
    Load = 0,
    /// A data store.
    Store = 1,
    /// A read-modify-write of one location (lackey `M`): one reference that needs write access.
    Modify = 2,
    /// An instruction fetch: looked up in the I-side TLBs.
    Fetch = 3,
}

impl AccessKind {
    /// Whether the access needs write permission (and sets the dirty bit).
    #[inline]
    pub const fn is_write(self) -> bool {
        matches!(self, AccessKind::Store | AccessKind::Modify)
    }
    /// Whether the access is an instruction fetch.
    #[inline]
    pub const fn is_fetch(self) -> bool {
        matches!(self, AccessKind::Fetch)
    }
}

/// One memory reference.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct MemRef {
    /// The guest virtual address referenced.
    pub va: Gva,
    /// Load, store, modify or instruction fetch.
    pub kind: AccessKind,
    /// Access size in bytes (1..=255; lackey prints up to the vector width).
    pub size: u8,
    /// Instructions retired since the previous reference, this one's instruction included when
    /// it was not counted before (a lackey `I` line carries 1, the data references of the same
    /// instruction carry 0; a generator's reference carries its `ipr`).
    pub instrs: u32,
    /// The load this reference's address was computed from, counted back among the data
    /// references (loads, stores, modifies) of its thread: 1 is the previous data reference,
    /// `k` the k-th before it. 0: the address depends on no load among the previous 255 data
    /// references — or, from a source that does not track dependences
    /// ([`EventSource::tracks_dependences`] false), nothing is known. An instruction fetch
    /// carries 0 and is not counted. What an out-of-order core model needs to tell a pointer
    /// chase (each address waits for the previous load) from independent loads that overlap
    /// (docs/model.md, "Timing").
    pub dep: u8,
}

impl MemRef {
    /// A reference with no known dependence.
    #[inline(always)]
    pub const fn new(va: Gva, kind: AccessKind, size: u8, instrs: u32) -> MemRef {
        MemRef {
            va,
            kind,
            size,
            instrs,
            dep: 0,
        }
    }
}

/// Page protection of a mapping, as `mmap`'s `PROT_*` bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct Prot(pub u8);

impl Prot {
    /// `PROT_READ`.
    pub const READ: u8 = 1;
    /// `PROT_WRITE`.
    pub const WRITE: u8 = 2;
    /// `PROT_EXEC`.
    pub const EXEC: u8 = 4;
    /// Read, write and execute.
    pub const RWX: Prot = Prot(7);
    /// Read and write.
    pub const RW: Prot = Prot(3);
    /// Whether reads are allowed.
    pub const fn read(self) -> bool {
        self.0 & Self::READ != 0
    }
    /// Whether writes are allowed.
    pub const fn write(self) -> bool {
        self.0 & Self::WRITE != 0
    }
    /// Whether instruction fetches are allowed.
    pub const fn exec(self) -> bool {
        self.0 & Self::EXEC != 0
    }
}

/// How a mapping is backed, as `mmap`'s flags.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct MapFlags(pub u8);

impl MapFlags {
    /// `MAP_SHARED` (otherwise private).
    pub const SHARED: u8 = 1;
    /// Backed by a file (otherwise anonymous).
    pub const FILE: u8 = 2;
    /// `MAP_HUGETLB`: hugetlbfs pages from the guest's pool (a generator's `huge=1`).
    pub const HUGE: u8 = 4;
    /// The region is a stack (grows down).
    pub const STACK: u8 = 8;
    /// `MAP_POPULATE`: the whole range is mapped at mmap time (the `prefault` parameter).
    pub const POPULATE: u8 = 16;
}

/// Advice given by `madvise` about a range (Linux's `MADV_*` values, which recorded programs
/// pass through unchanged).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct Advice(pub u8);

impl Advice {
    /// `MADV_DONTNEED`: the range's pages are dropped; the next touch maps fresh zeroed pages.
    pub const DONTNEED: u8 = 4;
    /// `MADV_FREE`: the kernel may drop the range's pages lazily.
    pub const FREE: u8 = 8;
    /// `MADV_HUGEPAGE`: the range is eligible for transparent huge pages.
    pub const HUGEPAGE: u8 = 14;
    /// `MADV_NOHUGEPAGE`: the range must not get transparent huge pages.
    pub const NOHUGEPAGE: u8 = 15;
    /// `MADV_COLLAPSE`: collapse the range into huge pages now (Linux 6.1).
    pub const COLLAPSE: u8 = 25;

    /// Linux's name of the advice (`"hugepage"`, `"dontneed"`, ...), or `None` for a value
    /// vmmu does not name.
    pub const fn name(self) -> Option<&'static str> {
        match self.0 {
            Self::DONTNEED => Some("dontneed"),
            Self::FREE => Some("free"),
            Self::HUGEPAGE => Some("hugepage"),
            Self::NOHUGEPAGE => Some("nohugepage"),
            Self::COLLAPSE => Some("collapse"),
            _ => None,
        }
    }
}

/// One event of a workload.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Event {
    /// A memory reference by the current process.
    Ref(MemRef),
    /// Instructions retired with no memory reference (compute between references).
    Compute {
        /// Instructions retired.
        instrs: u64,
    },
    /// A new process with an empty address space (the first process of a trace, or `spawn`).
    ProcessCreate {
        /// Its process id.
        pid: u32,
    },
    /// The current process forks: `child` gets a copy-on-write copy of its address space.
    Fork {
        /// The parent (must be the current process).
        parent: u32,
        /// The new child.
        child: u32,
    },
    /// The current process replaces its image: a new, empty address space, same pid.
    Exec {
        /// The process (must be the current process).
        pid: u32,
    },
    /// A process ends and its address space is torn down.
    Exit {
        /// The process that ends.
        pid: u32,
    },
    /// The scheduler switches to `pid` (a CR3 write), that is to its main thread (`tid = pid`).
    Switch {
        /// The process switched to.
        pid: u32,
    },
    /// Process `pid` starts a thread `tid` (`clone` with `CLONE_VM`): it shares the address
    /// space. Thread ids are unique across the guest, and a process's main thread is
    /// `tid = pid`.
    ThreadCreate {
        /// The process.
        pid: u32,
        /// The new thread.
        tid: u32,
    },
    /// Thread `tid` of process `pid` ends (the main thread ends with the process, `Exit`).
    ThreadExit {
        /// The process.
        pid: u32,
        /// The thread.
        tid: u32,
    },
    /// The events that follow are thread `tid`'s, of process `pid` (a switch between threads of
    /// one process writes no CR3).
    Thread {
        /// The process.
        pid: u32,
        /// The thread.
        tid: u32,
    },
    /// `mmap`: a new region in the current process.
    Mmap {
        /// Start (page aligned).
        start: Gva,
        /// Length in bytes (a multiple of 4 KiB).
        len: u64,
        /// Protection.
        prot: Prot,
        /// Backing.
        flags: MapFlags,
    },
    /// `munmap` of a range of the current process.
    Munmap {
        /// Start (page aligned).
        start: Gva,
        /// Length in bytes.
        len: u64,
    },
    /// `mprotect` of a range of the current process.
    Mprotect {
        /// Start (page aligned).
        start: Gva,
        /// Length in bytes.
        len: u64,
        /// New protection.
        prot: Prot,
    },
    /// `mremap`: the range `[old, old+old_len)` moves to `[new, new+new_len)`.
    Mremap {
        /// Old start.
        old: Gva,
        /// Old length.
        old_len: u64,
        /// New start.
        new: Gva,
        /// New length.
        new_len: u64,
    },
    /// `madvise` of a range of the current process.
    Madvise {
        /// Start (page aligned).
        start: Gva,
        /// Length in bytes.
        len: u64,
        /// The advice.
        advice: Advice,
    },
    /// `brk`: the program break of the current process moves to `end`.
    Brk {
        /// The new break.
        end: Gva,
    },
    /// A phase marker (for per-phase statistics and policies).
    Phase {
        /// The phase number.
        id: u32,
    },
}

/// Events per batch between a source and the simulator (40 bytes each: 640 KiB). A trace
/// reader's decoder fills batches of this size and the single-vCPU loop asks for this many,
/// so a decoded batch is handed over by swapping buffers, not copied (docs/performance.md,
/// "The trace reader's threads").
pub const BATCH_EVENTS: usize = 16_384;

/// A stream of events read in batches (a generator, a trace reader, a converter).
///
/// Batches amortize the dynamic dispatch: the simulator asks for up to `max` events at a time
/// into a buffer it reuses, so nothing is allocated per event.
pub trait EventSource: Send {
    /// Appends up to `max` events to `buf` and returns how many it appended; 0 means the
    /// stream has ended. Errors name the file and line or byte offset.
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> crate::error::Result<usize>;

    /// Total number of events if known in advance (for progress bars).
    fn len_hint(&self) -> Option<u64> {
        None
    }

    /// A short description for results and progress lines (`random:footprint=1G,...`, a path).
    fn describe(&self) -> String;

    /// Whether the references' [`MemRef::dep`] fields are known: a dependence of 0 then means
    /// "independent", otherwise "unknown" (a lackey trace, a version 1 `.vtrace`).
    fn tracks_dependences(&self) -> bool {
        false
    }
}

/// An [`EventSource`] over an in-memory list (tests and small crafted sequences).
pub struct VecSource {
    events: Vec<Event>,
    pos: usize,
    name: String,
    dependences: bool,
}

impl VecSource {
    /// A source that yields `events` in order, their dependences unknown.
    pub fn new(name: impl Into<String>, events: Vec<Event>) -> Self {
        VecSource {
            events,
            pos: 0,
            name: name.into(),
            dependences: false,
        }
    }

    /// The same source, declaring its references' dependences known.
    pub fn with_dependences(mut self) -> Self {
        self.dependences = true;
        self
    }
}

impl EventSource for VecSource {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> crate::error::Result<usize> {
        let end = (self.pos + max).min(self.events.len());
        buf.extend_from_slice(&self.events[self.pos..end]);
        let n = end - self.pos;
        self.pos = end;
        Ok(n)
    }
    fn len_hint(&self) -> Option<u64> {
        Some(self.events.len() as u64)
    }
    fn describe(&self) -> String {
        self.name.clone()
    }
    fn tracks_dependences(&self) -> bool {
        self.dependences
    }
}
