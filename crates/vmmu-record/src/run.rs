//! The `vmmu record -- CMD` pipeline: run the command under Valgrind with vg-memtrace, read
//! every process image's stream from a Unix socket, merge, relocate if asked, and write a
//! `.vtrace` as the program runs.

use crate::layout::{LayoutStats, NativeLayout};
use crate::live::LiveStreams;
use crate::merge::{MergeStats, Merged, StreamSet};
use serde::Serialize;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use vmmu_core::error::{Error, Result};
use vmmu_core::event::{Event, EventSource};
use vmmu_core::trace::{TraceMeta, TraceWriter, WriterOptions};

/// The tool's name as Valgrind knows it (`--tool=`).
pub const TOOL: &str = "vgmemtrace";
/// The tool's file name in its library directory.
pub const TOOL_FILE: &str = "vgmemtrace-amd64-linux";

/// How to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// The `.vtrace` file to write.
    pub output: String,
    /// Leave out instruction fetches (instruction counts are kept on the data references).
    pub no_instr: bool,
    /// Record forked children too (otherwise only the command's own process). The process's
    /// own `execve`s are followed either way: the new program is the same process going on.
    pub follow_children: bool,
    /// Relocate regions to a native-like x86-64 Linux layout (module `layout`).
    pub native_layout: bool,
    /// Track which load each data reference's address was computed from ([`MemRef::dep`],
    /// docs/recording.md "Load dependences"); off, the trace declares its dependences unknown.
    ///
    /// [`MemRef::dep`]: vmmu_core::event::MemRef::dep
    pub deps: bool,
    /// The directory holding the tool beside Valgrind's own files (`VALGRIND_LIB`); `None`
    /// searches the usual places ([`find_tool_dir`]).
    pub tool_dir: Option<String>,
    /// The Valgrind launcher; `None` searches `PATH`.
    pub valgrind: Option<String>,
    /// How the trace is compressed.
    pub writer: WriterOptions,
}

impl RecordOptions {
    /// Defaults for writing `output`: fetches kept, dependences tracked, no children,
    /// Valgrind's layout, zstd level 1 with one compression thread (recording is bound by
    /// compression).
    pub fn new(output: impl Into<String>) -> Self {
        RecordOptions {
            output: output.into(),
            no_instr: false,
            follow_children: false,
            native_layout: false,
            deps: true,
            tool_dir: None,
            valgrind: None,
            writer: WriterOptions {
                level: 1,
                ..WriterOptions::default()
            },
        }
    }
}

/// Where a recording stands (for a progress line).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RecordProgress {
    /// Memory references written.
    pub refs: u64,
    /// Other events written (process and address-space events, compute).
    pub events: u64,
    /// Bytes of the trace file so far.
    pub bytes_written: u64,
    /// Raw record bytes received from the tool (8 per reference).
    pub raw_bytes: u64,
    /// `raw_bytes / bytes_written`.
    pub compression_ratio: f64,
    /// Seconds since the command started.
    pub elapsed_s: f64,
}

/// What a recording produced.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RecordSummary {
    /// The trace written.
    pub output: String,
    /// The command recorded.
    pub command: Vec<String>,
    /// Events in the trace.
    pub events: u64,
    /// Memory references (fetches, loads, stores, modifies).
    pub refs: u64,
    /// Instruction fetches.
    pub fetches: u64,
    /// Loads.
    pub loads: u64,
    /// Stores.
    pub stores: u64,
    /// Modifies (read-modify-write of one location).
    pub modifies: u64,
    /// Data references whose address was computed from a load within 255 data references
    /// (`MemRef::dep` not 0).
    pub dependent_refs: u64,
    /// Phase markers (`VMMU_PHASE`, docs/recording.md).
    pub phases: u64,
    /// Instructions retired.
    pub instructions: u64,
    /// Address-space events (mmap, munmap, mprotect, mremap, brk).
    pub os_events: u64,
    /// Processes (the command and its forked children).
    pub processes: u64,
    /// `execve`s followed.
    pub execs: u64,
    /// Forked children not recorded (children were not asked for).
    pub children_not_followed: u64,
    /// `execve`s whose new program was not recorded.
    pub execs_not_followed: u64,
    /// What the trace lacks, one sentence each naming the pid and the program: children and
    /// execs not followed (the first 20; the counts above have them all).
    pub warnings: Vec<String>,
    /// Threads created.
    pub threads_created: u64,
    /// Raw record bytes received from the tool.
    pub raw_bytes: u64,
    /// Bytes of the trace file.
    pub trace_bytes: u64,
    /// `trace_bytes / refs`.
    pub bytes_per_ref: f64,
    /// `raw_bytes / trace_bytes`.
    pub compression_ratio: f64,
    /// Wall-clock seconds, from starting Valgrind to the finished file.
    pub elapsed_s: f64,
    /// References per second of wall-clock time, end to end (recording and compression).
    pub refs_per_s: f64,
    /// The command's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the command, if one did.
    pub signal: Option<i32>,
    /// The trace is marked truncated (the command was killed or crashed, the recording was
    /// interrupted, or the command's own `execve` was not followed): its events are valid but
    /// the program's run does not reach its end in them.
    pub truncated: bool,
    /// The recording was stopped by the progress callback (Ctrl-C).
    pub interrupted: bool,
    /// Processes whose stream ended without an exit record (killed; their last records lost).
    pub vanished_processes: u64,
    /// Fork records whose child stream never arrived (included in the warnings).
    pub missing_children: u64,
    /// Streams never placed in the trace.
    pub unclaimed_streams: u64,
    /// References no region covered under `--native-layout` (left unrelocated).
    pub untranslated_refs: u64,
    /// Executables, in the order their images ended (a forked child's image before its
    /// `execve` has its parent's name).
    pub exes: Vec<String>,
    /// Options used.
    pub no_instr: bool,
    /// Options used.
    pub follow_children: bool,
    /// Options used.
    pub native_layout: bool,
    /// Options used: dependences tracked (the trace's `dependences`).
    pub dependences: bool,
}

/// How to get Valgrind, for error messages.
pub const INSTALL_VALGRIND: &str = "Valgrind is needed to record programs: install it with \
     `sudo apt-get install valgrind` (Debian, Ubuntu), `sudo dnf install valgrind valgrind-devel` \
     (Fedora) or `sudo pacman -S valgrind` (Arch), then build the recording tool with \
     `make -C tools/vg-memtrace` (or `make install`)";

fn not_found(what: &str, msg: String) -> Error {
    Error::io(what, io::Error::new(io::ErrorKind::NotFound, msg))
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `name` as `execvp` would find it: a path if it has a slash, else the first executable
/// `PATH` entry.
pub fn resolve_command(name: &str) -> Result<PathBuf> {
    if name.is_empty() {
        return Err(not_found("vmmu record", "no command given".into()));
    }
    if name.contains('/') {
        let p = PathBuf::from(name);
        if !p.exists() {
            return Err(not_found(name, "command not found (no such file)".into()));
        }
        if !is_executable(&p) {
            return Err(Error::io(
                name,
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "not an executable file".to_string(),
                ),
            ));
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if is_executable(&p) {
            return Ok(p);
        }
    }
    Err(not_found(name, "command not found on PATH".into()))
}

/// The Valgrind launcher: `given`, or `valgrind` on `PATH`.
pub fn find_valgrind(given: Option<&str>) -> Result<PathBuf> {
    match given {
        Some(v) => resolve_command(v).map_err(|_| {
            not_found(
                v,
                format!("Valgrind launcher not found. {INSTALL_VALGRIND}"),
            )
        }),
        None => resolve_command("valgrind")
            .map_err(|_| not_found("valgrind", format!("not found on PATH. {INSTALL_VALGRIND}"))),
    }
}

/// The directory to give Valgrind as `VALGRIND_LIB`: `given`, else `$VMMU_VALGRIND_LIB`, else
/// the build directory of this source tree (`tools/vg-memtrace/build/lib`), else where
/// `make install` puts it (`~/.local/lib/vmmu/valgrind`, `/usr/local/lib/vmmu/valgrind`).
pub fn find_tool_dir(given: Option<&str>) -> Result<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(g) = given {
        candidates.push(g.into());
    } else {
        if let Some(env) = std::env::var_os("VMMU_VALGRIND_LIB") {
            candidates.push(env.into());
        }
        candidates
            .push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/vg-memtrace/build/lib"));
        if let Some(home) = std::env::var_os("HOME") {
            candidates.push(Path::new(&home).join(".local/lib/vmmu/valgrind"));
        }
        candidates.push("/usr/local/lib/vmmu/valgrind".into());
        candidates.push("/usr/lib/vmmu/valgrind".into());
    }
    for c in &candidates {
        if c.join(TOOL_FILE).is_file() && c.join("vgpreload_core-amd64-linux.so").exists() {
            return Ok(c.canonicalize().unwrap_or_else(|_| c.clone()));
        }
    }
    let looked: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    Err(not_found(
        TOOL_FILE,
        format!(
            "the vg-memtrace Valgrind tool is not built (looked in {}): build it with \
             `make -C tools/vg-memtrace` (or `make install`), or point VMMU_VALGRIND_LIB at \
             its directory",
            looked.join(", ")
        ),
    ))
}

/// A private directory for the socket and spill files, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir> {
        static N: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let p = base.join(format!(
            "vmmu-record-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&p)
            .map_err(|e| Error::io(p.display().to_string(), e))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The recorded command, shared with the thread that waits for it.
struct Waiter {
    child: Arc<Mutex<Child>>,
    status: Arc<Mutex<Option<ExitStatus>>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Waiter {
    fn start(child: Child, stop: Arc<AtomicBool>) -> Waiter {
        let child = Arc::new(Mutex::new(child));
        let status = Arc::new(Mutex::new(None));
        let handle = {
            let (child, status) = (child.clone(), status.clone());
            std::thread::Builder::new()
                .name("vmmu-record-wait".into())
                .spawn(move || loop {
                    let done = child.lock().map(|mut c| c.try_wait()).unwrap_or(Ok(None));
                    match done {
                        Ok(Some(s)) => {
                            *status.lock().unwrap_or_else(|p| p.into_inner()) = Some(s);
                            stop.store(true, Ordering::SeqCst);
                            return;
                        }
                        Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                        Err(_) => {
                            stop.store(true, Ordering::SeqCst);
                            return;
                        }
                    }
                })
                .ok()
        };
        Waiter {
            child,
            status,
            handle,
        }
    }

    fn kill(&self) {
        if let Ok(mut c) = self.child.lock() {
            let _ = c.kill();
        }
    }

    fn wait(mut self) -> Option<ExitStatus> {
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let s = *self.status.lock().unwrap_or_else(|p| p.into_inner());
        s
    }
}

/// The merged (and maybe relocated) live stream.
enum Source {
    Plain(Box<Merged<LiveStreams>>),
    Native(Box<NativeLayout<Merged<LiveStreams>>>),
}

impl Source {
    fn next_batch(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<usize> {
        match self {
            Source::Plain(m) => m.next_batch(buf, max),
            Source::Native(n) => n.next_batch(buf, max),
        }
    }
    fn merge(&self) -> &Merged<LiveStreams> {
        match self {
            Source::Plain(m) => m,
            Source::Native(n) => n.inner(),
        }
    }
    fn layout(&self) -> Option<&LayoutStats> {
        match self {
            Source::Plain(_) => None,
            Source::Native(n) => Some(n.stats()),
        }
    }
}

/// Events per batch handed from the merging thread to the writing thread.
const BATCH: usize = 8 * 1024;

/// Runs the merge (decoding, relocation) on its own thread, so that it overlaps with encoding
/// on the caller's thread: batches go one way, emptied batches come back.
fn spawn_merger(
    mut src: Source,
    tx: SyncSender<Result<Vec<Event>>>,
    back: Receiver<Vec<Event>>,
) -> Result<JoinHandle<(MergeStats, Option<LayoutStats>, u64)>> {
    std::thread::Builder::new()
        .name("vmmu-record-merge".into())
        .spawn(move || {
            loop {
                let mut buf = back
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(BATCH));
                buf.clear();
                match src.next_batch(&mut buf, BATCH) {
                    Ok(0) => break,
                    Ok(_) => {
                        if tx.send(Ok(buf)).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        break;
                    }
                }
            }
            let unclaimed = src.merge().set().unclaimed();
            (
                src.merge().stats().clone(),
                src.layout().cloned(),
                unclaimed,
            )
        })
        .map_err(|e| Error::io("vmmu record", e))
}

/// Records `cmd` into `opts.output`. `progress` is called about five times a second; when it
/// returns false the command is killed and the trace finished as truncated (the summary says
/// `interrupted`).
pub fn record(
    cmd: &[String],
    opts: &RecordOptions,
    progress: &mut dyn FnMut(&RecordProgress) -> bool,
) -> Result<RecordSummary> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Err(Error::config(
            "record",
            "recording needs Valgrind on x86-64 Linux (amd64-linux)",
        ));
    }
    let Some(first) = cmd.first() else {
        return Err(not_found(
            "vmmu record",
            "no command given (vmmu record -- CMD ARGS...)".into(),
        ));
    };
    let program = resolve_command(first)?;
    let valgrind = find_valgrind(opts.valgrind.as_deref())?;
    let tool_dir = find_tool_dir(opts.tool_dir.as_deref())?;
    let tmp = TempDir::new()?;
    let socket = tmp.0.join("s");

    let meta = TraceMeta {
        description: cmd.join(" "),
        source: format!(
            "vmmu record {} (vg-memtrace{}{}{}{})",
            env!("CARGO_PKG_VERSION"),
            if opts.no_instr { ", --no-instr" } else { "" },
            if opts.follow_children {
                ", --follow-children"
            } else {
                ""
            },
            if opts.native_layout {
                ", --native-layout"
            } else {
                ""
            },
            if opts.deps { "" } else { ", --no-deps" },
        ),
        has_os_events: true,
        dependences: opts.deps,
    };
    let mut writer = TraceWriter::create_with(&opts.output, meta, opts.writer)?;

    let mut live = LiveStreams::listen(&socket)?;
    let yn = |b: bool| if b { "yes" } else { "no" };
    let mut command = Command::new(&valgrind);
    command
        .env("VALGRIND_LIB", &tool_dir)
        .arg(format!("--tool={TOOL}"))
        .arg("-q")
        .arg(format!("--out=unix:{}", socket.display()))
        .arg(format!("--instr={}", yn(!opts.no_instr)))
        .arg(format!("--follow-forks={}", yn(opts.follow_children)))
        .arg(format!("--deps={}", yn(opts.deps)))
        // Valgrind runs an exec'd program only with this; the tool turns it off in a child
        // it does not follow, so only the followed processes' execs stay under Valgrind.
        .arg("--trace-children=yes")
        .arg("--child-silent-after-fork=yes")
        .arg(&program)
        .args(&cmd[1..])
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    let start = Instant::now();
    let child = command
        .spawn()
        .map_err(|e| Error::io(valgrind.display().to_string(), e))?;
    live.set_root_pid(child.id());

    let handle = live.handle();
    let waiter = Waiter::start(child, handle.stop_flag());
    let merged = Merged::new(live, opts.follow_children);
    let src = if opts.native_layout {
        Source::Native(Box::new(NativeLayout::new(merged)))
    } else {
        Source::Plain(Box::new(merged))
    };
    let (tx, rx) = mpsc::sync_channel(4);
    let (back_tx, back_rx) = mpsc::channel();
    let merger = match spawn_merger(src, tx, back_rx) {
        Ok(m) => m,
        Err(e) => {
            waiter.kill();
            return Err(e);
        }
    };
    let stop_all = |rx: Receiver<Result<Vec<Event>>>| {
        waiter.kill();
        handle.abandon_all();
        drop(rx);
    };

    let (mut refs, mut events) = (0u64, 0u64);
    let mut last = Instant::now();
    let mut interrupted = false;
    let report = |refs: u64, events: u64, w: &TraceWriter| {
        let raw = handle.received();
        let bytes = w.bytes_written();
        RecordProgress {
            refs,
            events,
            bytes_written: bytes,
            raw_bytes: raw,
            // Approximate while chunks are in flight; 0 until a few are written.
            compression_ratio: if bytes >= 1 << 20 {
                raw as f64 / bytes as f64
            } else {
                0.0
            },
            elapsed_s: start.elapsed().as_secs_f64(),
        }
    };
    loop {
        let buf = match rx.recv() {
            Ok(Ok(buf)) => buf,
            Ok(Err(e)) => {
                stop_all(rx);
                let _ = merger.join();
                let _ = writer.finish_truncated();
                return Err(e);
            }
            Err(_) => break, // the merge is complete
        };
        let r = buf.iter().filter(|e| matches!(e, Event::Ref(_))).count() as u64;
        refs += r;
        events += buf.len() as u64 - r;
        if let Err(e) = writer.write_batch(&buf) {
            stop_all(rx);
            let _ = merger.join();
            return Err(write_failed(e, &opts.output, refs + events, writer));
        }
        let _ = back_tx.send(buf);
        if last.elapsed() >= Duration::from_millis(200) {
            last = Instant::now();
            if !progress(&report(refs, events, &writer)) {
                interrupted = true;
                stop_all(rx);
                break;
            }
        }
    }
    let (ms, layout, unclaimed) = merger.join().map_err(|_| {
        Error::io(
            "vmmu record",
            io::Error::other("the merging thread panicked"),
        )
    })?;
    let status = waiter.wait();
    let signal = status.and_then(|s| s.signal());
    let exit_code = status.and_then(|s| s.code());
    if ms.streams == 0 && !interrupted {
        let _ = writer.finish_truncated();
        let _ = std::fs::remove_file(&opts.output);
        let bad = handle.bad_connections();
        return Err(Error::io(
            valgrind.display().to_string(),
            io::Error::other(format!(
                "Valgrind ended ({}) before the program started; see its messages above{}",
                match (exit_code, signal) {
                    (Some(c), _) => format!("exit code {c}"),
                    (_, Some(s)) => format!("signal {s}"),
                    _ => "status unknown".into(),
                },
                if bad.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", bad.join("; "))
                }
            )),
        ));
    }
    let truncated =
        interrupted || ms.root_vanished || ms.root_exec_not_followed || signal.is_some();
    progress(&report(refs, events, &writer));
    let finished = if truncated {
        writer.finish_truncated()
    } else {
        writer.finish()
    };
    let total = finished?;
    let elapsed = start.elapsed().as_secs_f64();
    let c = ms.counts;
    Ok(RecordSummary {
        output: opts.output.clone(),
        command: cmd.to_vec(),
        events: total.events,
        refs: total.refs,
        fetches: c.fetches,
        loads: c.loads,
        stores: c.stores,
        modifies: c.modifies,
        dependent_refs: c.dependent,
        phases: c.phases,
        instructions: c.instrs,
        os_events: c.os_events,
        processes: ms.processes,
        execs: ms.execs,
        children_not_followed: ms.children_not_followed,
        execs_not_followed: ms.execs_not_followed,
        warnings: warnings(&ms),
        threads_created: c.threads_created,
        raw_bytes: ms.raw_bytes,
        trace_bytes: total.bytes,
        bytes_per_ref: if total.refs > 0 {
            total.bytes as f64 / total.refs as f64
        } else {
            0.0
        },
        compression_ratio: if total.bytes > 0 {
            ms.raw_bytes as f64 / total.bytes as f64
        } else {
            0.0
        },
        elapsed_s: elapsed,
        refs_per_s: total.refs as f64 / elapsed.max(1e-9),
        exit_code,
        signal,
        truncated,
        interrupted,
        vanished_processes: ms.vanished,
        missing_children: ms.missing_children,
        unclaimed_streams: unclaimed,
        untranslated_refs: layout.map_or(0, |l| l.untranslated_refs),
        exes: ms.exes,
        no_instr: opts.no_instr,
        follow_children: opts.follow_children,
        native_layout: opts.native_layout,
        dependences: opts.deps,
    })
}

/// The sentences for what the trace lacks, with a count of those not listed.
fn warnings(ms: &MergeStats) -> Vec<String> {
    let mut w: Vec<String> = ms.not_followed.iter().map(|n| n.message.clone()).collect();
    let total = ms.children_not_followed + ms.missing_children + ms.execs_not_followed;
    if total > w.len() as u64 {
        w.push(format!(
            "and {} more children or execs not recorded",
            total - w.len() as u64
        ));
    }
    w
}

/// The error for a failed trace write: a full disk is said plainly, with what was kept.
fn write_failed(e: Error, output: &str, written: u64, writer: TraceWriter) -> Error {
    let full = matches!(&e, Error::Io { source, .. }
        if source.raw_os_error() == Some(28) || source.kind() == io::ErrorKind::StorageFull);
    let kept = writer.finish_truncated().is_ok();
    if !full {
        return e;
    }
    Error::io(
        output,
        io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "no space left on the device after {written} events; the command was stopped \
                 and {}",
                if kept {
                    "the trace was finished as truncated"
                } else {
                    "the trace file is incomplete (readers report it truncated)"
                }
            ),
        ),
    )
}
