//! The stream split into one queue per guest thread: events read ahead of the simulation,
//! each put in its thread's queue, an OS event recorded against the processes whose address
//! space it changes (it waits for their earlier events); threads created and reaped as their
//! process's events say.

use super::{Thread, Vcpus};
use crate::error::{Error, Result};
use crate::event::{Event, EventSource};
use crate::sim::Simulator;
use std::collections::VecDeque;

/// Events read ahead of the simulation at most (the stream is split into per-thread queues;
/// a thread that has no events within this window waits).
pub(super) const LOOKAHEAD: usize = 1 << 20;
/// Events read from the source at a time into the threads' queues. The scheduler picks among
/// the events read so far, so this size is part of the schedule: it stays 64 Ki whatever batch
/// the single-vCPU loop reads.
pub(super) const FILL: usize = 1 << 16;

/// Whether `e` changes the guest's state beyond the thread that issues it (runs in stream
/// order).
pub(super) fn is_os(e: &Event) -> bool {
    !matches!(
        e,
        Event::Ref(_) | Event::Compute { .. } | Event::Phase { .. }
    )
}

/// The processes whose address space OS event `e`, issued by a thread of `owner`, changes
/// (a fork both the parent's and the child's; a creation the new process's).
pub(super) fn os_pids(e: &Event, owner: u32) -> [Option<u32>; 2] {
    match *e {
        Event::Fork { parent, child } => [Some(parent), Some(child)],
        Event::ProcessCreate { pid }
        | Event::Exec { pid }
        | Event::Exit { pid }
        | Event::ThreadCreate { pid, .. }
        | Event::ThreadExit { pid, .. } => [Some(pid), None],
        _ => [Some(owner), None],
    }
}

impl Vcpus {
    /// Reads one batch of the stream into the threads' queues.
    pub(super) fn fill(&mut self, source: &mut dyn EventSource) -> Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        if source.next_batch(&mut buf, FILL)? == 0 {
            self.ended = true;
        }
        for e in buf.drain(..) {
            self.demux(e)?;
        }
        self.buf = buf;
        Ok(())
    }

    /// Puts one stream event in its thread's queue.
    pub(super) fn demux(&mut self, e: Event) -> Result<()> {
        let seq = self.seq;
        self.seq += 1;
        let fail = |reason: String| Error::Event {
            event: seq,
            what: format!("{e:?}"),
            reason,
        };
        match e {
            Event::Switch { pid } => {
                self.stream_tid = Some(pid);
                return self.exists(pid).map_err(fail);
            }
            Event::Thread { tid, .. } => {
                self.stream_tid = Some(tid);
                return self.exists(tid).map_err(fail);
            }
            _ => {}
        }
        let owner = match (self.stream_tid, &e) {
            (Some(t), _) => t,
            // The stream starts (or resumes after its running process ended) with a process
            // that creates itself, or with pid 1 created implicitly.
            (None, Event::ProcessCreate { pid }) => self.spawn(*pid, *pid),
            (None, _) if self.threads.is_empty() => self.spawn(1, 1),
            (None, _) => {
                return Err(fail(
                    "no process runs (the running one exited and no switch followed)".into(),
                ))
            }
        };
        self.stream_tid = Some(owner);
        match e {
            Event::ProcessCreate { pid } if pid != owner => {
                self.spawn(pid, pid);
            }
            Event::Fork { child, .. } => {
                self.spawn(child, child);
            }
            Event::ThreadCreate { pid, tid } => {
                self.spawn(pid, tid);
            }
            _ => {}
        }
        let owner_pid = self.threads[&owner].pid;
        match e {
            Event::Exit { pid } if pid == owner_pid => self.stream_tid = None,
            Event::ThreadExit { pid, tid } if tid == owner => self.stream_tid = Some(pid),
            _ => {}
        }
        if is_os(&e) {
            for pid in os_pids(&e, owner_pid).into_iter().flatten() {
                self.pending_os.entry(pid).or_default().push_back(seq);
            }
        }
        self.threads
            .get_mut(&owner)
            .expect("the owner was found or spawned above")
            .queue
            .push_back((seq, e));
        self.buffered += 1;
        Ok(())
    }

    pub(super) fn exists(&self, tid: u32) -> std::result::Result<(), String> {
        if self.threads.contains_key(&tid) {
            Ok(())
        } else {
            Err(format!("thread {tid} was never created in the stream"))
        }
    }

    /// A new thread, placed on its pinned vCPU or the vCPU with the fewest live threads.
    pub(super) fn spawn(&mut self, pid: u32, tid: u32) -> u32 {
        let v = self.pinned.get(&tid).copied().unwrap_or_else(|| {
            (0..self.vcpus.len())
                .min_by_key(|&v| (self.vcpus[v].queue.len(), v))
                .unwrap_or(0)
        });
        self.vcpus[v].queue.push_back(tid);
        self.threads.insert(
            tid,
            Thread {
                pid,
                queue: VecDeque::new(),
                vcpu: v,
                born: false,
            },
        );
        tid
    }

    /// Marks the threads that event `e` of thread `tid` brought to life.
    pub(super) fn born(&mut self, sim: &Simulator, tid: u32, e: &Event) {
        let new = match *e {
            Event::ProcessCreate { pid } | Event::Fork { child: pid, .. } => Some(pid),
            Event::ThreadCreate { tid, .. } => Some(tid),
            _ => None,
        };
        for t in [Some(tid), new].into_iter().flatten() {
            if let Some(th) = self.threads.get_mut(&t) {
                th.born |= sim.os().process(th.pid).is_some();
            }
        }
    }

    /// Drops the threads whose process (or themselves) ended; a thread with events left is an
    /// error.
    pub(super) fn reap(&mut self, sim: &Simulator) -> Result<()> {
        let dead: Vec<u32> = self
            .threads
            .iter()
            .filter(|(&tid, t)| {
                t.born
                    && (sim.os().process(t.pid).is_none()
                        || tid != t.pid && sim.os().thread_pid(tid) != Some(t.pid))
            })
            .map(|(&tid, _)| tid)
            .collect();
        for tid in dead {
            let t = self.threads.remove(&tid).expect("listed above");
            if let Some((seq, e)) = t.queue.front() {
                return Err(Error::Event {
                    event: *seq,
                    what: format!("{e:?}"),
                    reason: format!("thread {tid} of process {} has ended", t.pid),
                });
            }
            for vc in &mut self.vcpus {
                vc.queue.retain(|&q| q != tid);
                if vc.current == Some(tid) {
                    vc.current = None;
                }
            }
        }
        Ok(())
    }
}
