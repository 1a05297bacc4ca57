//! The streams of a recording in progress: a Unix socket that every process image of the
//! traced program connects to (vg-memtrace's `--out=unix:PATH`), one reader thread per
//! connection, and per-stream queues the merger pulls from.
//!
//! Only the stream the merger is consuming (the top of its process stack) is throttled: when
//! its queue is full, its reader stops reading and the traced process blocks in `send`, so
//! Valgrind never runs ahead of compression by more than a bounded amount. Every other stream
//! is read as fast as it arrives, into memory and then into a spill file, because blocking a
//! process the merger is not waiting for could deadlock the program (a parent waiting for a
//! child that waits for it).

use crate::merge::{StreamId, StreamInfo, StreamSet};
use crate::raw::{StreamHeader, HEADER_SIZE};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::FileExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use vmmu_core::error::{Error, Result};

/// Bytes read from a connection at a time.
const CHUNK: usize = 1 << 20;
/// Queued bytes beyond which the consumed stream's reader waits.
const CURRENT_CAP: usize = 32 << 20;
/// Queued bytes beyond which another stream spills to disk.
const OTHER_CAP: usize = 64 << 20;

struct Spill {
    file: File,
    write_off: u64,
    read_off: u64,
}

#[derive(Default)]
struct QState {
    mem: VecDeque<Vec<u8>>,
    mem_bytes: usize,
    spill: Option<Spill>,
    eof: bool,
    error: Option<String>,
    current: bool,
    abandoned: bool,
}

/// The bytes of one stream between its reader thread and the merger.
struct Queue {
    st: Mutex<QState>,
    cv: Condvar,
    spill_path: PathBuf,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Queue {
    fn spilling(st: &QState) -> bool {
        st.spill.as_ref().is_some_and(|s| s.read_off < s.write_off)
    }

    /// Appends a chunk (reader thread).
    fn push(&self, buf: Vec<u8>) -> std::io::Result<()> {
        let mut st = lock(&self.st);
        while st.current && !st.abandoned && !Self::spilling(&st) && st.mem_bytes >= CURRENT_CAP {
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.abandoned {
            return Ok(());
        }
        if Self::spilling(&st) || (!st.current && st.mem_bytes + buf.len() > OTHER_CAP) {
            if st.spill.is_none() {
                let file = File::options()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&self.spill_path)?;
                st.spill = Some(Spill {
                    file,
                    write_off: 0,
                    read_off: 0,
                });
            }
            let sp = st.spill.as_mut().expect("spill");
            sp.file.write_all_at(&buf, sp.write_off)?;
            sp.write_off += buf.len() as u64;
        } else {
            st.mem_bytes += buf.len();
            st.mem.push_back(buf);
        }
        self.cv.notify_all();
        Ok(())
    }

    fn end(&self, error: Option<String>) {
        let mut st = lock(&self.st);
        st.eof = true;
        st.error = error;
        self.cv.notify_all();
    }

    /// The next chunk (merger); `None` at the end of the stream.
    fn pop(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let mut st = lock(&self.st);
        loop {
            if st.abandoned {
                return Ok(None);
            }
            if let Some(b) = st.mem.pop_front() {
                st.mem_bytes -= b.len();
                self.cv.notify_all();
                return Ok(Some(b));
            }
            if Self::spilling(&st) {
                let sp = st.spill.as_mut().expect("spill");
                let n = (sp.write_off - sp.read_off).min(CHUNK as u64) as usize;
                let mut b = vec![0u8; n];
                sp.file
                    .read_exact_at(&mut b, sp.read_off)
                    .map_err(|e| Error::io(self.spill_path.display().to_string(), e))?;
                sp.read_off += n as u64;
                if sp.read_off == sp.write_off {
                    sp.read_off = 0;
                    sp.write_off = 0;
                    let _ = sp.file.set_len(0);
                }
                return Ok(Some(b));
            }
            if st.eof {
                if let Some(e) = st.error.take() {
                    // A read error on the socket ends the stream like a killed process does;
                    // say so once.
                    eprintln!("vmmu record: {name}: {e}");
                }
                return Ok(None);
            }
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn set_current(&self, on: bool) {
        let mut st = lock(&self.st);
        st.current = on;
        self.cv.notify_all();
    }

    fn abandon(&self) {
        let mut st = lock(&self.st);
        st.abandoned = true;
        st.mem.clear();
        st.mem_bytes = 0;
        st.spill = None;
        self.cv.notify_all();
    }
}

struct Entry {
    info: StreamInfo,
    queue: Arc<Queue>,
    claimed: bool,
}

#[derive(Default)]
struct RegState {
    streams: Vec<Entry>,
    /// Connections accepted whose header has not been read yet.
    pending: u64,
    /// No connection will be accepted any more.
    accept_done: bool,
    /// Connections that closed without a valid header.
    bad: Vec<String>,
    /// The recording was stopped: nothing more is read or claimed.
    abandoned: bool,
}

/// The streams known so far, shared by the acceptor, the readers and the merger.
struct Registry {
    st: Mutex<RegState>,
    cv: Condvar,
}

impl Registry {
    fn closed(st: &RegState) -> bool {
        st.abandoned || (st.accept_done && st.pending == 0)
    }
}

/// The live streams of one recording.
pub struct LiveStreams {
    handle: LiveHandle,
    root_pid: u32,
    acceptor: Option<JoinHandle<()>>,
}

/// What other threads may do to a recording in progress: stop it, ask how it goes.
#[derive(Clone)]
pub struct LiveHandle {
    reg: Arc<Registry>,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    pool: Arc<Mutex<Vec<Vec<u8>>>>,
    socket: PathBuf,
}

impl LiveHandle {
    /// Stops accepting connections once those already waiting are taken (the command has
    /// exited); streams already open are still read to their end.
    pub fn stop_accepting(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// A flag that, once set, stops accepting connections (for the thread that waits for the
    /// command to exit).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Bytes received so far over all connections.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Connections that closed without a valid stream header.
    pub fn bad_connections(&self) -> Vec<String> {
        lock(&self.reg.st).bad.clone()
    }

    /// Streams never claimed by the merger.
    pub fn unclaimed(&self) -> u64 {
        lock(&self.reg.st)
            .streams
            .iter()
            .filter(|e| !e.claimed)
            .count() as u64
    }

    /// Abandons the recording: readers discard what still arrives, the merger sees every
    /// stream end.
    pub fn abandon_all(&self) {
        self.stop_accepting();
        let mut st = lock(&self.reg.st);
        st.abandoned = true;
        for e in &st.streams {
            e.queue.abandon();
        }
        self.reg.cv.notify_all();
    }
}

impl LiveStreams {
    /// Listens on a new socket at `socket`; spill files go beside it.
    pub fn listen(socket: &Path) -> Result<LiveStreams> {
        let name = socket.display().to_string();
        let listener = UnixListener::bind(socket).map_err(|e| Error::io(&name, e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io(&name, e))?;
        let handle = LiveHandle {
            reg: Arc::new(Registry {
                st: Mutex::new(RegState::default()),
                cv: Condvar::new(),
            }),
            stop: Arc::new(AtomicBool::new(false)),
            received: Arc::new(AtomicU64::new(0)),
            pool: Arc::new(Mutex::new(Vec::new())),
            socket: socket.to_path_buf(),
        };
        let dir = socket.parent().unwrap_or(Path::new(".")).to_path_buf();
        let acceptor = {
            let h = handle.clone();
            std::thread::Builder::new()
                .name("vmmu-record-accept".into())
                .spawn(move || accept_loop(listener, h, dir))
                .map_err(|e| Error::io(&name, e))?
        };
        Ok(LiveStreams {
            handle,
            root_pid: 0,
            acceptor: Some(acceptor),
        })
    }

    /// The pid of the recorded command (the Valgrind process): its first image is the root.
    pub fn set_root_pid(&mut self, pid: u32) {
        self.root_pid = pid;
    }

    /// A handle for other threads.
    pub fn handle(&self) -> LiveHandle {
        self.handle.clone()
    }

    /// Waits until a stream satisfying `pred` is registered, claims it and makes it the
    /// consumed stream; `None` once no stream can arrive any more.
    fn claim(&self, pred: impl Fn(&StreamHeader) -> bool) -> Option<StreamId> {
        let reg = &self.handle.reg;
        let mut st = lock(&reg.st);
        loop {
            if st.abandoned {
                return None;
            }
            if let Some(id) = (0..st.streams.len())
                .find(|&i| !st.streams[i].claimed && pred(&st.streams[i].info.header))
            {
                st.streams[id].claimed = true;
                st.streams[id].queue.set_current(true);
                return Some(id);
            }
            if Registry::closed(&st) {
                return None;
            }
            st = reg
                .cv
                .wait_timeout(st, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn queue(&self, id: StreamId) -> Arc<Queue> {
        lock(&self.handle.reg.st).streams[id].queue.clone()
    }
}

impl Drop for LiveStreams {
    fn drop(&mut self) {
        self.handle.abandon_all();
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_file(&self.handle.socket);
    }
}

impl StreamSet for LiveStreams {
    fn root(&mut self) -> Result<Option<StreamId>> {
        let pid = self.root_pid;
        Ok(self.claim(|h| !h.forked() && h.pid == pid))
    }

    fn info(&self, id: StreamId) -> StreamInfo {
        lock(&self.handle.reg.st).streams[id].info.clone()
    }

    fn fork_child(&mut self, parent: StreamId, child_pid: u32) -> Result<Option<StreamId>> {
        let p = self.info(parent).header;
        self.queue(parent).set_current(false);
        let got = self.claim(|h| h.forked() && h.pid == child_pid && h.ppid == p.pid);
        if got.is_none() {
            self.queue(parent).set_current(true);
        }
        Ok(got)
    }

    fn exec_successor(&mut self, prev: StreamId) -> Result<Option<StreamId>> {
        let p = self.info(prev).header;
        Ok(self.claim(|h| !h.forked() && h.pid == p.pid && h.start_ns > p.start_ns))
    }

    fn next_chunk(&mut self, id: StreamId) -> Result<Option<Vec<u8>>> {
        let (q, name) = {
            let st = lock(&self.handle.reg.st);
            (
                st.streams[id].queue.clone(),
                st.streams[id].info.name.clone(),
            )
        };
        q.pop(&name)
    }

    fn recycle(&mut self, chunk: Vec<u8>) {
        let mut pool = lock(&self.handle.pool);
        if pool.len() < 8 && chunk.capacity() == CHUNK {
            pool.push(chunk);
        }
    }

    fn done(&mut self, id: StreamId) {
        let st = lock(&self.handle.reg.st);
        st.streams[id].queue.abandon();
    }

    fn resume(&mut self, id: StreamId) {
        self.queue(id).set_current(true);
    }

    fn unclaimed(&self) -> u64 {
        self.handle.unclaimed()
    }

    fn describe(&self) -> String {
        format!("recording on {}", self.handle.socket.display())
    }
}

fn accept_loop(listener: UnixListener, h: LiveHandle, dir: PathBuf) {
    let mut n = 0u64;
    loop {
        match listener.accept() {
            Ok((conn, _)) => {
                n += 1;
                lock(&h.reg.st).pending += 1;
                let h2 = h.clone();
                let spill = dir.join(format!("spill-{n}"));
                let spawned = std::thread::Builder::new()
                    .name(format!("vmmu-record-read-{n}"))
                    .spawn(move || read_stream(conn, h2, spill, n));
                if spawned.is_err() {
                    let mut st = lock(&h.reg.st);
                    st.pending -= 1;
                    st.bad
                        .push(format!("connection {n}: cannot start a reader thread"));
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                if h.stop.load(Ordering::SeqCst) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => break,
        }
    }
    let mut st = lock(&h.reg.st);
    st.accept_done = true;
    h.reg.cv.notify_all();
}

fn read_stream(mut conn: UnixStream, lh: LiveHandle, spill: PathBuf, n: u64) {
    let (reg, received) = (&lh.reg, &lh.received);
    let _ = conn.set_nonblocking(false);
    // Hand over a partly filled chunk when the process pauses.
    let _ = conn.set_read_timeout(Some(Duration::from_millis(50)));
    let mut h = [0u8; HEADER_SIZE];
    let mut got = 0;
    while got < HEADER_SIZE {
        match conn.read(&mut h[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if retry(&e) => {}
            Err(_) => break,
        }
    }
    received.fetch_add(got as u64, Ordering::Relaxed);
    let name = format!("stream {n}");
    let header = match StreamHeader::parse(&h[..got], &name) {
        Ok(hd) => hd,
        Err(e) => {
            let mut st = lock(&reg.st);
            st.pending -= 1;
            if got > 0 {
                st.bad.push(e.to_string());
            }
            reg.cv.notify_all();
            return;
        }
    };
    let queue = Arc::new(Queue {
        st: Mutex::new(QState::default()),
        cv: Condvar::new(),
        spill_path: spill.clone(),
    });
    {
        let mut st = lock(&reg.st);
        st.streams.push(Entry {
            info: StreamInfo {
                name: format!("pid {} (stream {n})", header.pid),
                header,
            },
            queue: queue.clone(),
            claimed: false,
        });
        st.pending -= 1;
        reg.cv.notify_all();
    }
    let mut error = None;
    loop {
        let mut buf = lock(&lh.pool).pop().unwrap_or_default();
        buf.resize(CHUNK, 0);
        let mut filled = 0;
        // Fill most of a chunk before handing it over: fewer, larger chunks.
        let res = loop {
            match conn.read(&mut buf[filled..]) {
                Ok(0) => break Ok(true),
                Ok(k) => {
                    filled += k;
                    if filled >= CHUNK / 2 {
                        break Ok(false);
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if retry(&e) => {
                    if filled > 0 {
                        break Ok(false);
                    }
                }
                Err(e) => break Err(e),
            }
        };
        if filled > 0 {
            buf.truncate(filled);
            received.fetch_add(filled as u64, Ordering::Relaxed);
            if let Err(e) = queue.push(buf) {
                error = Some(format!(
                    "cannot buffer the stream in {}: {e}",
                    spill.display()
                ));
                break;
            }
        }
        match res {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => {
                error = Some(format!("reading the stream failed: {e}"));
                break;
            }
        }
    }
    queue.end(error);
    let _ = std::fs::remove_file(&spill);
}

fn retry(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Interrupted | ErrorKind::WouldBlock | ErrorKind::TimedOut
    )
}
