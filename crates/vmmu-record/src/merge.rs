//! Merging per-process streams into one guest event stream (docs/recording.md, "Merge order").
//!
//! Each process image writes its own stream. The merged order is a depth-first walk of the
//! process tree, which is simple, deterministic and independent of how the processes were
//! scheduled while recording:
//!
//! - the root process's stream starts the trace (`ProcessCreate`);
//! - at the parent's fork record: `Fork { parent, child }`, `Switch { child }`, then the child's
//!   whole life (its own forks placed the same way, its execs in order), `Exit { child }`,
//!   `Switch { parent }`, and the parent continues after its fork;
//! - at the end of an image that called `execve`, the next image of the same pid follows
//!   (`Exec { pid }`), whether or not children are followed: an exec is the same process going
//!   on; at the end of a process, `Exit { pid }`.
//!
//! A child that is not followed (children not asked for, or its stream never arrived) and an
//! exec whose new image never arrived are noted in [`MergeStats::not_followed`], with the pid
//! and the program, so that the recording can say what its trace lacks.
//!
//! Within a process, threads keep the order Valgrind ran them in (one at a time), marked by
//! `Thread` events; a process's first thread is its main thread (`tid = pid`), the others get
//! guest thread ids from [`FRESH_TID`] up, so a multi-vCPU replay can run them concurrently. A pid that is
//! still live in the merged order when it is reused (possible only after pid wraparound) gets a
//! fresh id above Linux's largest pid, 2^22.

use crate::raw::{Control, Step, StreamCounts, StreamDecoder, StreamEnd, StreamHeader};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use vmmu_core::error::{Error, Result};
use vmmu_core::event::{Event, EventSource};

/// Identifies a stream within a [`StreamSet`].
pub type StreamId = usize;

/// What a set knows of a stream before reading it.
#[derive(Clone, Debug)]
pub struct StreamInfo {
    /// Its header.
    pub header: StreamHeader,
    /// A name for messages (a file path, or `pid N`).
    pub name: String,
}

/// The streams of one recording, complete (files) or still arriving (a live recording).
pub trait StreamSet: Send {
    /// The root process's first stream; `None` if the recording produced none.
    fn root(&mut self) -> Result<Option<StreamId>>;
    /// The header and name of a stream.
    fn info(&self, id: StreamId) -> StreamInfo;
    /// The unclaimed stream of `child_pid` forked by the process of stream `parent` (a live
    /// set waits for it to arrive, or for the recording to end).
    fn fork_child(&mut self, parent: StreamId, child_pid: u32) -> Result<Option<StreamId>>;
    /// The unclaimed stream of the image that replaced stream `prev` by `execve`.
    fn exec_successor(&mut self, prev: StreamId) -> Result<Option<StreamId>>;
    /// The next bytes of a stream after its header; `None` at its end.
    fn next_chunk(&mut self, id: StreamId) -> Result<Option<Vec<u8>>>;
    /// Gives back a consumed chunk for reuse.
    fn recycle(&mut self, _chunk: Vec<u8>) {}
    /// The merger is done with a stream.
    fn done(&mut self, _id: StreamId) {}
    /// The merger consumes stream `id` again (after a child's stream ended).
    fn resume(&mut self, _id: StreamId) {}
    /// Streams never claimed (children whose fork record was lost, images never reached).
    fn unclaimed(&self) -> u64;
    /// A short description (the directory, the command).
    fn describe(&self) -> String;
}

/// A process or program that ran during the recording but is not in the trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotFollowed {
    /// The process: the child's pid, or the pid that called `execve`.
    pub pid: u32,
    /// The program: for a child, the one it was forked from (what it ran when it started);
    /// for an exec, the program the `execve` named.
    pub command: String,
    /// What was not followed and why, as a sentence naming the pid and the program.
    pub message: String,
}

/// How many [`NotFollowed`] notes are kept (the counts go on).
pub const NOT_FOLLOWED_KEPT: usize = 20;

/// What the merge saw.
#[derive(Clone, Debug, Default)]
pub struct MergeStats {
    /// Processes in the trace (root and forked children).
    pub processes: u64,
    /// Streams read (process images).
    pub streams: u64,
    /// Images replaced by `execve` and followed.
    pub execs: u64,
    /// Processes whose stream ended without an exit record (killed, or recording stopped).
    pub vanished: u64,
    /// Fork records whose child stream never arrived.
    pub missing_children: u64,
    /// Forked children not recorded because children were not asked for.
    pub children_not_followed: u64,
    /// `execve`s whose new image never arrived (its program is not in the trace).
    pub execs_not_followed: u64,
    /// The root process's recording ended at an `execve` that was not followed: the command
    /// went on without being recorded.
    pub root_exec_not_followed: bool,
    /// The first [`NOT_FOLLOWED_KEPT`] children and execs not followed.
    pub not_followed: Vec<NotFollowed>,
    /// The root process's exit status, when its exit record is there.
    pub root_exit: Option<i32>,
    /// The root process's stream ended without an exit record (nor an exec).
    pub root_vanished: bool,
    /// Raw stream bytes read, headers included.
    pub raw_bytes: u64,
    /// Record counts over all streams.
    pub counts: StreamCounts,
    /// Executable names, in the order their images ended (a forked child's image before its
    /// `execve` has its parent's name).
    pub exes: Vec<String>,
}

struct Frame {
    real_pid: u32,
    sim_pid: u32,
    stream: StreamId,
    dec: StreamDecoder,
    chunk: Vec<u8>,
    pos: usize,
    is_root: bool,
    /// Valgrind's id of the process's main thread (its first).
    main_vg: Option<u32>,
    /// Valgrind thread id → guest thread id, for the other threads.
    tids: FxHashMap<u32, u32>,
    /// The guest thread running (a `Thread` event that names it again is left out).
    running_tid: u32,
}

/// Events decoded per refill of the internal buffer.
const BATCH: usize = 16 * 1024;
/// Events one decoding step may add beyond its limit: a reference split into 64 pieces, a
/// `Compute` and the control events of a fork or an exit.
const HEADROOM: usize = 96;
/// Fresh ids for reused pids start above Linux's largest `pid_max`.
const FRESH_PID: u32 = 1 << 22;
/// Guest ids of secondary threads start here, above every pid.
pub const FRESH_TID: u32 = 1 << 30;

/// The merged event stream of a [`StreamSet`].
pub struct Merged<S: StreamSet> {
    set: S,
    follow: bool,
    stack: Vec<Frame>,
    started: bool,
    pending: Vec<Event>,
    pending_pos: usize,
    live: FxHashSet<u32>,
    next_fresh: u32,
    next_tid: u32,
    stats: MergeStats,
}

impl<S: StreamSet> Merged<S> {
    /// Merges `set`; with `follow_children` false, forked children are left out (and noted);
    /// `execve`s are followed either way.
    pub fn new(set: S, follow_children: bool) -> Self {
        Merged {
            set,
            follow: follow_children,
            stack: Vec::new(),
            started: false,
            pending: Vec::with_capacity(BATCH + 64),
            pending_pos: 0,
            live: FxHashSet::default(),
            next_fresh: FRESH_PID,
            next_tid: FRESH_TID,
            stats: MergeStats::default(),
        }
    }

    /// What the merge saw so far.
    pub fn stats(&self) -> &MergeStats {
        &self.stats
    }

    /// The stream set.
    pub fn set(&self) -> &S {
        &self.set
    }

    fn sim_pid(&mut self, real: u32) -> u32 {
        let sim = if self.live.contains(&real) {
            self.next_fresh += 1;
            self.next_fresh - 1
        } else {
            real
        };
        self.live.insert(sim);
        sim
    }

    fn push_frame(&mut self, id: StreamId, sim_pid: u32, is_root: bool) {
        let info = self.set.info(id);
        let dec = StreamDecoder::new(&info.header, info.name);
        self.stats.streams += 1;
        self.stats.raw_bytes += crate::raw::HEADER_SIZE as u64;
        self.stack.push(Frame {
            real_pid: info.header.pid,
            sim_pid,
            stream: id,
            dec,
            chunk: Vec::new(),
            pos: 0,
            is_root,
            main_vg: None,
            tids: FxHashMap::default(),
            running_tid: sim_pid,
        });
    }

    fn start(&mut self, out: &mut Vec<Event>) -> Result<()> {
        self.started = true;
        let Some(root) = self.set.root()? else {
            return Ok(());
        };
        let pid = self.set.info(root).header.pid;
        let sim = self.sim_pid(pid);
        out.push(Event::ProcessCreate { pid: sim });
        self.stats.processes += 1;
        self.push_frame(root, sim, true);
        Ok(())
    }

    /// Decodes events into `out` until it holds `limit` (a few more at most: a split
    /// reference, control events); false once everything is merged and nothing was added.
    fn fill(&mut self, out: &mut Vec<Event>, limit: usize) -> Result<bool> {
        if !self.started {
            self.start(out)?;
        }
        let before = out.len();
        while out.len() < limit {
            let Some(top) = self.stack.last_mut() else {
                return Ok(out.len() > before);
            };
            if top.pos >= top.chunk.len() {
                let old = std::mem::take(&mut top.chunk);
                let id = top.stream;
                if old.capacity() > 0 {
                    self.set.recycle(old);
                }
                match self.set.next_chunk(id)? {
                    Some(c) => {
                        self.stats.raw_bytes += c.len() as u64;
                        let top = self.stack.last_mut().expect("top");
                        top.chunk = c;
                        top.pos = 0;
                    }
                    None => self.end_stream(out)?,
                }
                continue;
            }
            let from = out.len();
            let threads = top.dec.counts().thread_switches + top.dec.counts().threads_created;
            let step = top.dec.decode(&top.chunk, &mut top.pos, out, limit)?;
            let top = self.stack.last().expect("top");
            if top.dec.counts().thread_switches + top.dec.counts().threads_created != threads
                || out[from..]
                    .iter()
                    .any(|e| matches!(e, Event::ThreadExit { .. }))
            {
                self.map_threads(out, from);
            }
            match step {
                Step::NeedMore | Step::Full => {}
                Step::Control(Control::Fork { child }) => self.fork(child, out)?,
            }
        }
        Ok(true)
    }

    /// Gives the thread events decoded from `out[from..]` (Valgrind thread ids, no pid) the
    /// running process's pid and guest thread ids; the main thread's exit is its process's.
    fn map_threads(&mut self, out: &mut Vec<Event>, from: usize) {
        let top = self.stack.last_mut().expect("a running process");
        let pid = top.sim_pid;
        let tail: Vec<Event> = out.drain(from..).collect();
        for e in tail {
            match e {
                Event::Thread { tid: vg, .. } => {
                    let main = *top.main_vg.get_or_insert(vg);
                    let tid = if vg == main {
                        pid
                    } else if let Some(&t) = top.tids.get(&vg) {
                        t
                    } else {
                        // A thread Valgrind runs before reporting its creation.
                        let t = self.next_tid;
                        self.next_tid += 1;
                        top.tids.insert(vg, t);
                        out.push(Event::ThreadCreate { pid, tid: t });
                        t
                    };
                    if tid != top.running_tid {
                        top.running_tid = tid;
                        out.push(Event::Thread { pid, tid });
                    }
                }
                // Valgrind reports the creation of an image's first thread too: that thread
                // is the process's main thread.
                Event::ThreadCreate { tid: vg, .. } if top.main_vg.is_none() => {
                    top.main_vg = Some(vg);
                }
                Event::ThreadCreate { tid: vg, .. } => {
                    let t = self.next_tid;
                    self.next_tid += 1;
                    top.tids.insert(vg, t);
                    out.push(Event::ThreadCreate { pid, tid: t });
                }
                Event::ThreadExit { tid: vg, .. } => {
                    if let Some(t) = top.tids.remove(&vg) {
                        if top.running_tid == t {
                            // The events after a running thread's exit are the main
                            // thread's (the guest and the scheduler fall back to it).
                            top.running_tid = pid;
                        }
                        out.push(Event::ThreadExit { pid, tid: t });
                    }
                }
                other => out.push(other),
            }
        }
    }

    fn note(&mut self, pid: u32, command: &str, message: String) {
        if self.stats.not_followed.len() < NOT_FOLLOWED_KEPT {
            self.stats.not_followed.push(NotFollowed {
                pid,
                command: command.to_string(),
                message,
            });
        }
    }

    fn fork(&mut self, child: u32, out: &mut Vec<Event>) -> Result<()> {
        let parent = self.stack.last().expect("a running process");
        let (parent_stream, parent_sim, parent_pid) =
            (parent.stream, parent.sim_pid, parent.real_pid);
        let parent_exe = parent.dec.exe().unwrap_or("?").to_string();
        if !self.follow {
            self.stats.children_not_followed += 1;
            self.note(
                child,
                &parent_exe,
                format!(
                    "pid {child} (forked by pid {parent_pid}, `{parent_exe}`) was not recorded: \
                     children are recorded with --follow-children"
                ),
            );
            return Ok(());
        }
        match self.set.fork_child(parent_stream, child)? {
            None => {
                self.stats.missing_children += 1;
                self.note(
                    child,
                    &parent_exe,
                    format!(
                        "pid {child} (forked by pid {parent_pid}, `{parent_exe}`) was not \
                         recorded: its stream never arrived (did it fail to start under \
                         Valgrind?)"
                    ),
                );
            }
            Some(id) => {
                let sim = self.sim_pid(child);
                out.push(Event::Fork {
                    parent: parent_sim,
                    child: sim,
                });
                out.push(Event::Switch { pid: sim });
                self.stats.processes += 1;
                self.push_frame(id, sim, false);
            }
        }
        Ok(())
    }

    fn end_stream(&mut self, out: &mut Vec<Event>) -> Result<()> {
        let top = self.stack.last_mut().expect("a running process");
        let end = top.dec.finish(out)?;
        let c = top.dec.counts();
        if let Some(exe) = top.dec.exe() {
            self.stats.exes.push(exe.to_string());
        }
        let (stream, sim, real, is_root) = (top.stream, top.sim_pid, top.real_pid, top.is_root);
        let target = top.dec.exec_target().unwrap_or("?").to_string();
        let exe = top.dec.exe().unwrap_or("?").to_string();
        add_counts(&mut self.stats.counts, &c);
        self.set.done(stream);
        match end {
            StreamEnd::Exec => {
                if let Some(next) = self.set.exec_successor(stream)? {
                    out.push(Event::Exec { pid: sim });
                    self.stats.execs += 1;
                    self.stack.pop();
                    self.push_frame(next, sim, is_root);
                    return Ok(());
                }
                self.stats.execs_not_followed += 1;
                self.stats.root_exec_not_followed |= is_root;
                self.note(
                    real,
                    &target,
                    format!(
                        "pid {real} (`{exe}`) exec'd `{target}`, which was not recorded: no \
                         stream of the new program arrived (Valgrind did not run it: a setuid \
                         or non-x86-64 program, or one that failed to start under Valgrind); \
                         the trace of pid {real} ends at the exec"
                    ),
                );
            }
            StreamEnd::Exit(code) => {
                if is_root {
                    self.stats.root_exit = Some(code);
                }
            }
            StreamEnd::Vanished => {
                self.stats.vanished += 1;
                if is_root {
                    self.stats.root_vanished = true;
                }
            }
        }
        out.push(Event::Exit { pid: sim });
        self.live.remove(&sim);
        self.stack.pop();
        if let Some(parent) = self.stack.last() {
            out.push(Event::Switch {
                pid: parent.sim_pid,
            });
            let id = parent.stream;
            self.set.resume(id);
        }
        Ok(())
    }
}

fn add_counts(a: &mut StreamCounts, b: &StreamCounts) {
    a.fetches += b.fetches;
    a.loads += b.loads;
    a.stores += b.stores;
    a.modifies += b.modifies;
    a.instrs += b.instrs;
    a.os_events += b.os_events;
    a.threads_created += b.threads_created;
    a.thread_switches += b.thread_switches;
    a.dependent += b.dependent;
    a.phases += b.phases;
}

impl<S: StreamSet> EventSource for Merged<S> {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<usize> {
        let start = buf.len();
        let mut n = 0;
        while n < max {
            if self.pending_pos < self.pending.len() {
                let take = (max - n).min(self.pending.len() - self.pending_pos);
                buf.extend_from_slice(&self.pending[self.pending_pos..self.pending_pos + take]);
                self.pending_pos += take;
                n += take;
                continue;
            }
            self.pending.clear();
            self.pending_pos = 0;
            if n > 0 && max - n <= 2 * HEADROOM {
                break; // nearly full: the rest comes with the next call
            }
            if max - n > 2 * HEADROOM {
                // Straight into the caller's buffer, leaving room for what one step may add
                // beyond the limit.
                let more = self.fill(buf, start + max - HEADROOM)?;
                n = buf.len() - start;
                if !more {
                    break;
                }
            } else {
                let mut p = std::mem::take(&mut self.pending);
                let more = self.fill(&mut p, BATCH);
                self.pending = p;
                if !more? {
                    break;
                }
            }
        }
        Ok(n)
    }

    fn describe(&self) -> String {
        self.set.describe()
    }
}

/// The streams of a finished recording made with `--out=dir:PATH`: one `*.vgmt` file per
/// process image.
pub struct DirStreams {
    dir: PathBuf,
    infos: Vec<StreamInfo>,
    paths: Vec<PathBuf>,
    claimed: Vec<bool>,
    open: FxHashMap<StreamId, File>,
}

/// Bytes read from a stream file at a time.
const FILE_CHUNK: usize = 1 << 20;

impl DirStreams {
    /// Reads the headers of every `*.vgmt` file in `dir`.
    pub fn open(dir: &Path) -> Result<DirStreams> {
        let name = dir.display().to_string();
        let entries = std::fs::read_dir(dir).map_err(|e| Error::io(&name, e))?;
        let mut found = Vec::new();
        for e in entries {
            let p = e.map_err(|e| Error::io(&name, e))?.path();
            if p.extension().is_some_and(|x| x == "vgmt") {
                let pname = p.display().to_string();
                let mut f = File::open(&p).map_err(|e| Error::io(&pname, e))?;
                let mut h = Vec::with_capacity(crate::raw::HEADER_SIZE);
                (&mut f)
                    .take(crate::raw::HEADER_SIZE as u64)
                    .read_to_end(&mut h)
                    .map_err(|e| Error::io(&pname, e))?;
                if h.is_empty() {
                    continue; // a process that died before writing anything
                }
                let header = StreamHeader::parse(&h, &pname)?;
                found.push((
                    StreamInfo {
                        header,
                        name: pname,
                    },
                    p,
                ));
            }
        }
        found.sort_by(|a, b| {
            (a.0.header.start_ns, a.0.header.pid).cmp(&(b.0.header.start_ns, b.0.header.pid))
        });
        let n = found.len();
        let (infos, paths) = found.into_iter().unzip();
        Ok(DirStreams {
            dir: dir.to_path_buf(),
            infos,
            paths,
            claimed: vec![false; n],
            open: FxHashMap::default(),
        })
    }

    fn claim_first(&mut self, pred: impl Fn(&StreamHeader) -> bool) -> Option<StreamId> {
        let id =
            (0..self.infos.len()).find(|&i| !self.claimed[i] && pred(&self.infos[i].header))?;
        self.claimed[id] = true;
        Some(id)
    }
}

impl StreamSet for DirStreams {
    fn root(&mut self) -> Result<Option<StreamId>> {
        Ok(self.claim_first(|h| !h.forked()))
    }

    fn info(&self, id: StreamId) -> StreamInfo {
        self.infos[id].clone()
    }

    fn fork_child(&mut self, parent: StreamId, child_pid: u32) -> Result<Option<StreamId>> {
        let p = self.infos[parent].header.clone();
        Ok(self.claim_first(|h| {
            h.forked() && h.pid == child_pid && h.ppid == p.pid && h.start_ns >= p.start_ns
        }))
    }

    fn exec_successor(&mut self, prev: StreamId) -> Result<Option<StreamId>> {
        let p = self.infos[prev].header.clone();
        Ok(self.claim_first(|h| !h.forked() && h.pid == p.pid && h.start_ns > p.start_ns))
    }

    fn next_chunk(&mut self, id: StreamId) -> Result<Option<Vec<u8>>> {
        let name = &self.infos[id].name;
        if !self.open.contains_key(&id) {
            let mut f = File::open(&self.paths[id]).map_err(|e| Error::io(name, e))?;
            let mut skip = [0u8; crate::raw::HEADER_SIZE];
            f.read_exact(&mut skip).map_err(|e| Error::io(name, e))?;
            self.open.insert(id, f);
        }
        let f = self.open.get_mut(&id).expect("opened");
        let mut buf = Vec::with_capacity(FILE_CHUNK);
        f.take(FILE_CHUNK as u64)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io(name, e))?;
        Ok(if buf.is_empty() { None } else { Some(buf) })
    }

    fn done(&mut self, id: StreamId) {
        self.open.remove(&id);
    }

    fn unclaimed(&self) -> u64 {
        self.claimed.iter().filter(|c| !**c).count() as u64
    }

    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::tests::{bytes, header, rev, rref};
    use crate::raw::HF_FORKED;
    use vmmu_core::addr::Gva;

    /// An in-memory set: (header bytes parsed, data words).
    struct MemSet {
        infos: Vec<StreamInfo>,
        data: Vec<Option<Vec<u8>>>,
        claimed: Vec<bool>,
    }

    impl MemSet {
        fn new(streams: Vec<(u32, u32, u32, u64, Vec<u64>)>) -> Self {
            let mut infos = Vec::new();
            let mut data = Vec::new();
            for (pid, ppid, flags, t, words) in streams {
                let h = StreamHeader::parse(&header(pid, ppid, flags, t), "m").unwrap();
                infos.push(StreamInfo {
                    header: h,
                    name: format!("pid {pid}"),
                });
                data.push(Some(bytes(&words)));
            }
            let n = infos.len();
            MemSet {
                infos,
                data,
                claimed: vec![false; n],
            }
        }
        fn claim(&mut self, pred: impl Fn(&StreamHeader) -> bool) -> Option<StreamId> {
            let id =
                (0..self.infos.len()).find(|&i| !self.claimed[i] && pred(&self.infos[i].header))?;
            self.claimed[id] = true;
            Some(id)
        }
    }

    impl StreamSet for MemSet {
        fn root(&mut self) -> Result<Option<StreamId>> {
            Ok(self.claim(|h| !h.forked()))
        }
        fn info(&self, id: StreamId) -> StreamInfo {
            self.infos[id].clone()
        }
        fn fork_child(&mut self, parent: StreamId, child: u32) -> Result<Option<StreamId>> {
            let pp = self.infos[parent].header.pid;
            Ok(self.claim(|h| h.forked() && h.pid == child && h.ppid == pp))
        }
        fn exec_successor(&mut self, prev: StreamId) -> Result<Option<StreamId>> {
            let p = self.infos[prev].header.clone();
            Ok(self.claim(|h| !h.forked() && h.pid == p.pid && h.start_ns > p.start_ns))
        }
        fn next_chunk(&mut self, id: StreamId) -> Result<Option<Vec<u8>>> {
            Ok(self.data[id].take())
        }
        fn unclaimed(&self) -> u64 {
            self.claimed.iter().filter(|c| !**c).count() as u64
        }
        fn describe(&self) -> String {
            "mem".into()
        }
    }

    fn all(mut m: impl EventSource) -> Vec<Event> {
        let mut v = Vec::new();
        while m.next_batch(&mut v, 3).unwrap() > 0 {}
        v
    }

    const LOAD: u64 = 0;
    const FORK: u64 = 6;
    const EXEC: u64 = 7;
    const EXIT: u64 = 9;

    fn load(va: u64) -> Event {
        Event::Ref(vmmu_core::event::MemRef {
            va: Gva::new(va),
            kind: vmmu_core::event::AccessKind::Load,
            size: 8,
            instrs: 0,
            dep: 0,
        })
    }

    #[test]
    fn a_child_is_placed_at_its_parents_fork_then_the_parent_continues() {
        let set = MemSet::new(vec![
            (
                10,
                1,
                0,
                1,
                vec![
                    rref(LOAD, 0x1000, 8),
                    rev(FORK, 11, 0),
                    rref(LOAD, 0x2000, 8),
                    rev(EXIT, 0, 0),
                ],
            ),
            (
                11,
                10,
                HF_FORKED,
                2,
                vec![rref(LOAD, 0x3000, 8), rev(EXEC, 0, 0)],
            ),
            (11, 10, 0, 3, vec![rref(LOAD, 0x4000, 8), rev(EXIT, 3, 0)]),
        ]);
        let ev = all(Merged::new(set, true));
        assert_eq!(
            ev,
            vec![
                Event::ProcessCreate { pid: 10 },
                load(0x1000),
                Event::Fork {
                    parent: 10,
                    child: 11
                },
                Event::Switch { pid: 11 },
                load(0x3000),
                Event::Exec { pid: 11 },
                load(0x4000),
                Event::Exit { pid: 11 },
                Event::Switch { pid: 10 },
                load(0x2000),
                Event::Exit { pid: 10 },
            ]
        );
    }

    /// An exe-name record for `name` (at most 8 bytes here).
    fn exe_name(name: &str) -> Vec<u64> {
        let mut w = [0u8; 8];
        w[..name.len()].copy_from_slice(name.as_bytes());
        vec![rev(0x0E, name.len() as u64, 1), u64::from_le_bytes(w)]
    }

    #[test]
    fn without_follow_children_children_are_noted_and_execs_still_followed() {
        let mut root = exe_name("/bin/sh");
        root.extend([rev(FORK, 11, 0), rref(LOAD, 0x2000, 8), rev(EXEC, 0, 0)]);
        let set = MemSet::new(vec![
            (10, 1, 0, 1, root),
            (11, 10, HF_FORKED, 2, vec![rref(LOAD, 0x3000, 8)]),
            (10, 1, 0, 3, vec![rref(LOAD, 0x4000, 8), rev(EXIT, 0, 0)]),
        ]);
        let mut m = Merged::new(set, false);
        let mut ev = Vec::new();
        while m.next_batch(&mut ev, 100).unwrap() > 0 {}
        assert_eq!(
            ev,
            vec![
                Event::ProcessCreate { pid: 10 },
                load(0x2000),
                Event::Exec { pid: 10 },
                load(0x4000),
                Event::Exit { pid: 10 }
            ]
        );
        let st = m.stats();
        assert_eq!(
            (st.execs, st.children_not_followed, st.execs_not_followed),
            (1, 1, 0)
        );
        assert_eq!(st.not_followed.len(), 1);
        let n = &st.not_followed[0];
        assert_eq!((n.pid, n.command.as_str()), (11, "/bin/sh"));
        assert_eq!(
            n.message,
            "pid 11 (forked by pid 10, `/bin/sh`) was not recorded: children are recorded \
             with --follow-children"
        );
        assert!(!st.root_exec_not_followed);
    }

    #[test]
    fn an_exec_whose_new_image_never_arrives_is_noted_with_its_program() {
        let mut root = exe_name("/bin/sh");
        root.extend([rref(LOAD, 0x2000, 8), rev(EXEC, 7, 1)]);
        root.push(u64::from_le_bytes(*b"/bin/ls\0"));
        let set = MemSet::new(vec![(10, 1, 0, 1, root)]);
        let mut m = Merged::new(set, true);
        let mut ev = Vec::new();
        while m.next_batch(&mut ev, 100).unwrap() > 0 {}
        assert_eq!(
            ev,
            vec![
                Event::ProcessCreate { pid: 10 },
                load(0x2000),
                Event::Exit { pid: 10 }
            ]
        );
        let st = m.stats();
        assert_eq!((st.execs, st.execs_not_followed), (0, 1));
        assert!(st.root_exec_not_followed);
        let n = &st.not_followed[0];
        assert_eq!((n.pid, n.command.as_str()), (10, "/bin/ls"));
        assert!(
            n.message
                .starts_with("pid 10 (`/bin/sh`) exec'd `/bin/ls`, which was not recorded"),
            "{}",
            n.message
        );
    }

    #[test]
    fn a_reused_pid_still_live_gets_a_fresh_id() {
        // 10 forks 11, 11 forks a child that got pid 10 again (possible after wraparound
        // only if 10 had exited, which the merged order cannot show).
        let set = MemSet::new(vec![
            (10, 1, 0, 1, vec![rev(FORK, 11, 0), rev(EXIT, 0, 0)]),
            (
                11,
                10,
                HF_FORKED,
                2,
                vec![rev(FORK, 10, 0), rev(EXIT, 0, 0)],
            ),
            (10, 11, HF_FORKED, 3, vec![rref(LOAD, 0x5000, 8)]),
        ]);
        let mut m = Merged::new(set, true);
        let mut ev = Vec::new();
        while m.next_batch(&mut ev, 100).unwrap() > 0 {}
        assert!(ev.contains(&Event::Fork {
            parent: 11,
            child: FRESH_PID
        }));
        assert_eq!(m.stats().vanished, 1);
        assert_eq!(m.stats().processes, 3);
    }
}
