//! Recording real programs with vg-memtrace: small C programs compiled on the fly, recorded,
//! and checked for exact properties.
//!
//! They need Valgrind, gcc and the tool (`make test` installs and builds them). A missing one
//! fails each test with what to install; outside CI, set `VMMU_SKIP_VALGRIND=REASON` to skip
//! them instead (each prints that it was skipped and why, since the test harness has no
//! "skipped"). Under `CI=true` a missing tool always fails.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use vmmu_core::addr::Gva;
use vmmu_core::event::{AccessKind, Event, MapFlags, MemRef};
use vmmu_record::{self as record, layout, RecordOptions, RecordSummary};

/// What recording here lacks, if anything (the tool is built when it is missing).
fn missing() -> Option<&'static str> {
    static WHY: OnceLock<Option<String>> = OnceLock::new();
    WHY.get_or_init(|| {
        if let Err(e) = record::find_valgrind(None) {
            return Some(e.to_string());
        }
        if record::resolve_command("gcc").is_err() {
            return Some("gcc is not installed (apt-get install gcc)".into());
        }
        if record::find_tool_dir(None).is_err() {
            let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/vg-memtrace");
            let built = Command::new("make")
                .arg("-s")
                .arg("-C")
                .arg(&tool)
                .status()
                .is_ok_and(|s| s.success());
            if !built || record::find_tool_dir(None).is_err() {
                return Some("`make -C tools/vg-memtrace` failed to build the tool".into());
            }
        }
        None
    })
    .as_deref()
}

/// Whether the tests run in CI (`CI=true`, as `.ci/run` and CI services set it).
fn in_ci() -> bool {
    std::env::var("CI")
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

/// True when `test` can record here. Otherwise it fails, naming what is missing; outside CI,
/// `VMMU_SKIP_VALGRIND` may give a reason to skip instead: then it says so and returns false.
/// Under `CI=true` the reason is refused: CI installs the tools (`make test`).
fn available(test: &str) -> bool {
    let Some(why) = missing() else {
        return true;
    };
    if in_ci() {
        panic!(
            "{test} needs Valgrind, gcc and the vg-memtrace tool: {why}. CI=true, where `make \
             test` installs them (VMMU_SKIP_VALGRIND is not honoured under CI)"
        );
    }
    match std::env::var("VMMU_SKIP_VALGRIND") {
        Ok(reason) if !reason.trim().is_empty() => {
            // Straight to stderr: the harness would hide `eprintln!` of a passing test.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: {why} (VMMU_SKIP_VALGRIND: {reason})"
            );
            false
        }
        _ => panic!(
            "{test} needs Valgrind, gcc and the vg-memtrace tool: {why}. `make test` installs \
             them; set VMMU_SKIP_VALGRIND=REASON to skip the recording tests instead"
        ),
    }
}

/// A scratch directory for one test, emptied first, in Cargo's temporary directory for
/// integration tests (under `target/`): each run reuses it instead of leaving more in `/tmp`.
fn scratch(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("record-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `src` with gcc -O1 into `dir/name`.
fn compile(dir: &Path, name: &str, src: &str, extra: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let out = Command::new("gcc")
        .args(["-O1", "-g", "-o"])
        .arg(&exe)
        .arg(&c)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn rec(cmd: &[&str], opts: &RecordOptions) -> (RecordSummary, Vec<Event>) {
    let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    let s = record::record(&cmd, opts, &mut |_| true).unwrap();
    let mut src = vmmu_core::trace::open(&opts.output).unwrap();
    let mut ev = Vec::new();
    while src.next_batch(&mut ev, 1 << 16).unwrap() > 0 {}
    (s, ev)
}

fn check_ok(path: &str) {
    let r = record::check(path, &mut |_| true).unwrap();
    assert!(r.ok, "{}", r.to_text());
    assert_eq!(r.outside, 0);
    assert_eq!(r.unchecked, 0);
}

/// Two hex numbers per line, as the test programs write them.
fn read_pairs(p: &Path) -> Vec<(u64, u64)> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| {
            let mut it = l
                .split_whitespace()
                .map(|x| u64::from_str_radix(x, 16).unwrap());
            (it.next().unwrap(), it.next().unwrap())
        })
        .collect()
}

fn refs(ev: &[Event]) -> impl Iterator<Item = (usize, &MemRef)> {
    ev.iter().enumerate().filter_map(|(i, e)| match e {
        Event::Ref(r) => Some((i, r)),
        _ => None,
    })
}

const LOOP_AND_MMAP: &str = r#"
#include <stdio.h>
#include <sys/mman.h>
#define N 1000
volatile long arr[N];
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "w");
    fprintf(f, "%lx %lx\n", (unsigned long)&arr[0], (unsigned long)sizeof arr);
    fclose(f);
    for (long i = 0; i < N; i++)
        arr[i] = i;
    size_t len = 0x345000;
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    f = fopen(argv[1], "a");
    fprintf(f, "%lx %lx\n", (unsigned long)p, (unsigned long)len);
    fclose(f);
    for (size_t off = 0; off < len; off += 4096)
        ((volatile char *)p)[off] = 1;
    munmap(p, len);
    return 0;
}
"#;

#[test]
fn a_known_loop_stores_exactly_once_per_iteration_and_its_store_runs_n_times() {
    if !available("a_known_loop_stores_exactly_once_per_iteration_and_its_store_runs_n_times") {
        return;
    }
    let d = scratch("loop");
    let exe = compile(&d, "loop", LOOP_AND_MMAP, &[]);
    let addrs = d.join("addrs");
    let out = d.join("loop.vtrace");
    let opts = RecordOptions::new(out.to_str().unwrap());
    let (s, ev) = rec(&[exe.to_str().unwrap(), addrs.to_str().unwrap()], &opts);
    assert_eq!(s.exit_code, Some(0));
    assert!(!s.truncated);
    let pairs = read_pairs(&addrs);
    let (arr, size) = pairs[0];
    let in_arr = |r: &MemRef| r.va.raw() >= arr && r.va.raw() < arr + size;
    let stores: Vec<usize> = refs(&ev)
        .filter(|(_, r)| in_arr(r))
        .map(|(i, r)| {
            assert_eq!(r.kind, AccessKind::Store, "only stores touch arr");
            i
        })
        .collect();
    assert_eq!(stores.len(), 1000, "exactly N stores to arr");
    // The instruction that stores is fetched just before each store: it ran exactly N times.
    let store_insn = |i: usize| match &ev[i - 1] {
        Event::Ref(r) if r.kind == AccessKind::Fetch => r.va.raw(),
        other => panic!("a store not preceded by its fetch: {other:?}"),
    };
    let pc = store_insn(stores[0]);
    assert!(stores.iter().all(|&i| store_insn(i) == pc));
    let fetches_at_pc = refs(&ev)
        .filter(|(_, r)| r.kind == AccessKind::Fetch && r.va.raw() == pc)
        .count();
    assert_eq!(fetches_at_pc, 1000);
    // Every iteration runs the same number of instructions.
    let per_iter: Vec<usize> = stores
        .windows(2)
        .map(|w| {
            refs(&ev[w[0]..w[1]])
                .filter(|(_, r)| r.kind == AccessKind::Fetch)
                .count()
        })
        .collect();
    assert!(per_iter.iter().all(|&n| n == per_iter[0]), "{per_iter:?}");
    assert!(per_iter[0] >= 3 && per_iter[0] <= 8, "{per_iter:?}");
    check_ok(out.to_str().unwrap());
}

#[test]
fn an_mmap_of_a_known_size_comes_before_the_first_reference_into_it() {
    if !available("an_mmap_of_a_known_size_comes_before_the_first_reference_into_it") {
        return;
    }
    let d = scratch("mmap");
    let exe = compile(&d, "mm", LOOP_AND_MMAP, &[]);
    let addrs = d.join("addrs");
    let out = d.join("mm.vtrace");
    let opts = RecordOptions::new(out.to_str().unwrap());
    let (_, ev) = rec(&[exe.to_str().unwrap(), addrs.to_str().unwrap()], &opts);
    let (p, len) = read_pairs(&addrs)[1];
    let im = ev
        .iter()
        .position(|e| matches!(e, Event::Mmap(m) if m.start.raw() == p && m.len == len))
        .expect("the mmap is in the trace");
    let inside: Vec<usize> = refs(&ev)
        .filter(|(_, r)| r.va.raw() >= p && r.va.raw() < p + len)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(inside.len() as u64, len / 4096, "one store per page");
    assert!(
        im < inside[0],
        "mmap at {im}, first reference at {}",
        inside[0]
    );
    let iu = ev
        .iter()
        .position(|e| matches!(e, Event::Munmap(m) if m.start.raw() == p && m.len == len))
        .expect("the munmap is in the trace");
    assert!(iu > *inside.last().unwrap());
}

#[test]
fn without_fetches_the_instruction_count_is_kept() {
    if !available("without_fetches_the_instruction_count_is_kept") {
        return;
    }
    let d = scratch("noinstr");
    let exe = compile(&d, "ni", LOOP_AND_MMAP, &[]);
    let addrs = d.join("addrs");
    let a = d.join("a.vtrace");
    let b = d.join("b.vtrace");
    let cmd = [exe.to_str().unwrap(), addrs.to_str().unwrap()];
    let (sa, _) = rec(&cmd, &RecordOptions::new(a.to_str().unwrap()));
    let mut ob = RecordOptions::new(b.to_str().unwrap());
    ob.no_instr = true;
    let (sb, evb) = rec(&cmd, &ob);
    assert_eq!(sb.fetches, 0);
    assert!(refs(&evb).all(|(_, r)| r.kind != AccessKind::Fetch));
    let ia = vmmu_core::trace::info(a.to_str().unwrap(), &mut |_| true).unwrap();
    let ib = vmmu_core::trace::info(b.to_str().unwrap(), &mut |_| true).unwrap();
    assert_eq!(ia.instructions, sa.fetches);
    // The same program with the same arguments retires the same instructions.
    assert_eq!(ib.instructions, ia.instructions);
    assert_eq!(
        sb.loads + sb.stores + sb.modifies,
        sa.loads + sa.stores + sa.modifies
    );
    check_ok(b.to_str().unwrap());
}

const FORK_EXEC: &str = r#"
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
volatile long child_arr[500];
volatile long parent_arr[100];
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "w");
    fprintf(f, "%lx %lx\n", (unsigned long)&child_arr[0], (unsigned long)sizeof child_arr);
    fprintf(f, "%lx %lx\n", (unsigned long)&parent_arr[0], (unsigned long)sizeof parent_arr);
    fclose(f);
    pid_t c = fork();
    if (c == 0) {
        for (long i = 0; i < 500; i++)
            child_arr[i] = i;
        execl("/bin/true", "true", (char *)0);
        _exit(1);
    }
    waitpid(c, 0, 0);
    for (long i = 0; i < 100; i++)
        parent_arr[i] = i;
    return 0;
}
"#;

#[test]
fn a_forked_child_is_placed_at_its_fork_with_its_exec() {
    if !available("a_forked_child_is_placed_at_its_fork_with_its_exec") {
        return;
    }
    let d = scratch("fork");
    let exe = compile(&d, "fk", FORK_EXEC, &[]);
    let addrs = d.join("addrs");
    let out = d.join("fk.vtrace");
    let mut opts = RecordOptions::new(out.to_str().unwrap());
    opts.follow_children = true;
    let (s, ev) = rec(&[exe.to_str().unwrap(), addrs.to_str().unwrap()], &opts);
    assert_eq!(s.processes, 2);
    assert_eq!(s.execs, 1);
    let pairs = read_pairs(&addrs);
    let (ca, cs) = pairs[0];
    let (pa, ps) = pairs[1];
    let Some(&Event::ProcessCreate { pid: parent }) = ev.first() else {
        panic!("the trace starts with its process: {:?}", ev.first())
    };
    let fork = ev
        .iter()
        .position(|e| matches!(e, Event::Fork { parent: p, .. } if *p == parent))
        .expect("a fork");
    let Event::Fork { child, .. } = ev[fork] else {
        unreachable!()
    };
    assert_eq!(ev[fork + 1], Event::Switch { pid: child });
    let exec = ev
        .iter()
        .position(|e| *e == Event::Exec { pid: child })
        .expect("exec");
    let exit = ev
        .iter()
        .position(|e| *e == Event::Exit { pid: child })
        .expect("exit");
    assert_eq!(ev[exit + 1], Event::Switch { pid: parent });
    assert!(fork < exec && exec < exit);
    // The child's stores, all of them, between its fork and its exec; the parent's after.
    let child_stores: Vec<usize> = refs(&ev)
        .filter(|(_, r)| r.va.raw() >= ca && r.va.raw() < ca + cs)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(child_stores.len(), 500);
    assert!(child_stores.iter().all(|&i| fork < i && i < exec));
    let parent_stores: Vec<usize> = refs(&ev)
        .filter(|(_, r)| r.va.raw() >= pa && r.va.raw() < pa + ps)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(parent_stores.len(), 100);
    assert!(parent_stores.iter().all(|&i| i > exit));
    // The exec'd image starts with its own initial mappings.
    assert!(matches!(ev[exec + 1], Event::Mmap(_)));
    check_ok(out.to_str().unwrap());

    // Without --follow-children, only the parent is there, and the summary says which child
    // was left out.
    let out2 = d.join("fk2.vtrace");
    let (s2, ev2) = rec(
        &[exe.to_str().unwrap(), addrs.to_str().unwrap()],
        &RecordOptions::new(out2.to_str().unwrap()),
    );
    assert_eq!(s2.processes, 1);
    assert_eq!(
        (s2.children_not_followed, s2.execs, s2.execs_not_followed),
        (1, 0, 0)
    );
    assert!(!s2.truncated);
    assert_eq!(s2.warnings.len(), 1, "{:?}", s2.warnings);
    let w = &s2.warnings[0];
    assert!(
        w.starts_with("pid ") && w.contains(&format!("`{}`", exe.display())),
        "{w}"
    );
    assert!(w.contains("--follow-children"), "{w}");
    assert!(!ev2.iter().any(|e| matches!(e, Event::Fork { .. })));
    let (ca, cs) = read_pairs(&addrs)[0];
    assert_eq!(
        refs(&ev2)
            .filter(|(_, r)| r.va.raw() >= ca && r.va.raw() < ca + cs)
            .count(),
        0
    );
    check_ok(out2.to_str().unwrap());
}

#[test]
fn the_commands_own_exec_is_followed_through_a_shell_shim() {
    // What a pyenv shim does: a script whose shell execs the real program.
    if !available("the_commands_own_exec_is_followed_through_a_shell_shim") {
        return;
    }
    let d = scratch("shim");
    let exe = compile(&d, "real", LOOP_AND_MMAP, &[]);
    let shim = d.join("shim");
    std::fs::write(&shim, format!("#!/bin/sh\nexec {} \"$@\"\n", exe.display())).unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let addrs = d.join("addrs");
    let out = d.join("shim.vtrace");
    let (s, ev) = rec(
        &[shim.to_str().unwrap(), addrs.to_str().unwrap()],
        &RecordOptions::new(out.to_str().unwrap()),
    );
    assert_eq!(s.exit_code, Some(0));
    assert_eq!((s.processes, s.execs, s.execs_not_followed), (1, 1, 0));
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    assert!(!s.truncated);
    assert_eq!(s.exes.last().map(String::as_str), exe.to_str());
    let Some(&Event::ProcessCreate { pid }) = ev.first() else {
        panic!("the trace starts with its process")
    };
    let exec = ev
        .iter()
        .position(|e| *e == Event::Exec { pid })
        .expect("the exec is in the trace");
    // The real program's N stores are there, after the exec and its new mappings.
    let (arr, size) = read_pairs(&addrs)[0];
    let stores: Vec<usize> = refs(&ev)
        .filter(|(_, r)| {
            r.kind == AccessKind::Store && r.va.raw() >= arr && r.va.raw() < arr + size
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(stores.len(), 1000);
    assert!(stores[0] > exec);
    assert!(matches!(ev[exec + 1], Event::Mmap(_)));
    check_ok(out.to_str().unwrap());
}

const THREADS: &str = r#"
#include <pthread.h>
#define N 4
volatile long slots[N][1000];
static void *work(void *arg) {
    long k = (long)arg;
    for (long i = 0; i < 1000; i++)
        slots[k][i] = i;
    return 0;
}
int main(void) {
    pthread_t t[N];
    for (long k = 0; k < N; k++)
        pthread_create(&t[k], 0, work, (void *)k);
    for (long k = 0; k < N; k++)
        pthread_join(t[k], 0);
    return 0;
}
"#;

#[test]
fn threads_share_their_process_and_their_stacks_are_mapped() {
    if !available("threads_share_their_process_and_their_stacks_are_mapped") {
        return;
    }
    let d = scratch("threads");
    let exe = compile(&d, "th", THREADS, &["-pthread"]);
    let out = d.join("th.vtrace");
    let (s, ev) = rec(
        &[exe.to_str().unwrap()],
        &RecordOptions::new(out.to_str().unwrap()),
    );
    assert_eq!(s.processes, 1);
    assert!(s.threads_created >= 5, "{}", s.threads_created);
    assert!(!ev.iter().any(|e| matches!(e, Event::Switch { .. })));
    let stacks = ev
        .iter()
        .filter(|e| matches!(e, Event::Mmap(m) if m.flags.0 & MapFlags::STACK != 0))
        .count();
    assert!(stacks >= 5, "the main stack and 4 thread stacks: {stacks}");
    check_ok(out.to_str().unwrap());
    // The four workers are guest threads of the process, each created before it runs.
    let pid = match ev[0] {
        Event::ProcessCreate { pid } => pid,
        ref e => panic!("the trace starts with {e:?}"),
    };
    let created: Vec<u32> = ev
        .iter()
        .filter_map(|e| match *e {
            Event::ThreadCreate { pid: p, tid } if p == pid => Some(tid),
            _ => None,
        })
        .collect();
    assert_eq!(created.len(), 4, "{created:?}");
    assert!(created.iter().all(|&t| t >= vmmu_record::merge::FRESH_TID));
    for &t in &created {
        let made = ev
            .iter()
            .position(|e| *e == Event::ThreadCreate { pid, tid: t })
            .unwrap();
        let ran = ev
            .iter()
            .position(|e| *e == Event::Thread { pid, tid: t })
            .unwrap_or_else(|| panic!("thread {t} never runs"));
        assert!(made < ran);
    }
    // Replayed on four vCPUs with every translation checked, the threads spread out.
    for mode in ["native", "nested", "shadow"] {
        let cfg = vmmu_core::config::build(
            "nehalem-x5560",
            &[
                ("mode".into(), format!("\"{mode}\"")),
                ("guest.vcpus".into(), "4".into()),
                ("check".into(), "true".into()),
            ],
        )
        .unwrap();
        let mut src = vmmu_core::trace::open(out.to_str().unwrap()).unwrap();
        let r = vmmu_core::run::run(&cfg, &mut *src, &mut |_| true).unwrap();
        let busy = r.vcpus.iter().filter(|v| v.instructions > 0).count();
        assert!(busy >= 2, "{mode}: {:?}", r.vcpus);
        assert_eq!(r.checked_translations, r.memory_refs + r.fetches, "{mode}");
    }
}

#[test]
fn native_layout_moves_the_executable_stack_and_libraries_where_linux_puts_them() {
    if !available("native_layout_moves_the_executable_stack_and_libraries_where_linux_puts_them") {
        return;
    }
    let d = scratch("native");
    let exe = compile(&d, "nl", LOOP_AND_MMAP, &["-pie", "-fpie"]);
    let addrs = d.join("addrs");
    let a = d.join("vg.vtrace");
    let b = d.join("native.vtrace");
    let cmd = [exe.to_str().unwrap(), addrs.to_str().unwrap()];
    let (_, eva) = rec(&cmd, &RecordOptions::new(a.to_str().unwrap()));
    let mut ob = RecordOptions::new(b.to_str().unwrap());
    ob.native_layout = true;
    let (sb, evb) = rec(&cmd, &ob);
    assert_eq!(sb.untranslated_refs, 0);
    let first_file = |ev: &[Event]| {
        ev.iter()
            .find_map(|e| match e {
                Event::Mmap(m) if m.flags.0 & MapFlags::FILE != 0 => Some(m.start.raw()),
                _ => None,
            })
            .unwrap()
    };
    let (vg_exe, nat_exe) = (first_file(&eva), first_file(&evb));
    assert_eq!(nat_exe, layout::PIE_BASE);
    let stack_end = evb
        .iter()
        .find_map(|e| match e {
            Event::Mmap(m) if m.flags.0 & MapFlags::STACK != 0 => Some(m.start.raw() + m.len),
            _ => None,
        })
        .unwrap();
    assert_eq!(stack_end, layout::STACK_TOP);
    // Libraries (the loader first) right below the mmap base.
    let top_lib = evb
        .iter()
        .filter_map(|e| match e {
            Event::Mmap(m) if m.flags.0 & MapFlags::FILE != 0 && m.start.raw() != nat_exe => {
                Some(m.start.raw() + m.len)
            }
            _ => None,
        })
        .max()
        .unwrap();
    assert!(top_lib <= layout::MMAP_TOP && top_lib > layout::MMAP_TOP - (64 << 20));
    // The same N stores land on the relocated array.
    let (arr, size) = read_pairs(&addrs)[0];
    let narr = arr - vg_exe + nat_exe;
    let n = refs(&evb)
        .filter(|(_, r)| {
            r.kind == AccessKind::Store && r.va.raw() >= narr && r.va.raw() < narr + size
        })
        .count();
    assert_eq!(n, 1000);
    assert_eq!(eva.len(), evb.len());
    check_ok(b.to_str().unwrap());
}

const KILLED: &str = r#"
#include <signal.h>
#include <unistd.h>
volatile long a[100000];
int main(void) {
    for (long r = 0; r < 20; r++)
        for (long i = 0; i < 100000; i++)
            a[i] = i;
    kill(getpid(), SIGKILL);
    return 0;
}
"#;

const CRASH: &str = r#"
volatile long a[1000];
int main(void) {
    for (long i = 0; i < 1000; i++)
        a[i] = i;
    *(volatile int *)8 = 1;
    return 0;
}
"#;

#[test]
fn a_program_killed_or_crashing_leaves_a_truncated_readable_trace() {
    if !available("a_program_killed_or_crashing_leaves_a_truncated_readable_trace") {
        return;
    }
    let d = scratch("killed");
    for (name, src, sig) in [("killed", KILLED, 9), ("crash", CRASH, 11)] {
        let exe = compile(&d, name, src, &[]);
        let out = d.join(format!("{name}.vtrace"));
        let (s, ev) = rec(
            &[exe.to_str().unwrap()],
            &RecordOptions::new(out.to_str().unwrap()),
        );
        assert_eq!(s.signal, Some(sig), "{name}");
        assert!(s.truncated, "{name}");
        assert!(s.refs > 10_000, "{name}: {}", s.refs);
        let info = vmmu_core::trace::info(out.to_str().unwrap(), &mut |_| true).unwrap();
        assert!(info.truncated, "{name}");
        assert_eq!(info.events, ev.len() as u64);
        check_ok(out.to_str().unwrap());
    }
}

#[test]
fn bad_commands_and_a_missing_valgrind_are_clear_errors() {
    let d = scratch("bad");
    let out = d.join("x.vtrace");
    let opts = RecordOptions::new(out.to_str().unwrap());
    let err = record::record(&["no-such-command-vmmu".into()], &opts, &mut |_| true)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no-such-command-vmmu") && err.contains("command not found"),
        "{err}"
    );
    let err = record::record(&["/no/such/file".into()], &opts, &mut |_| true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("command not found"), "{err}");
    let err = record::record(&[], &opts, &mut |_| true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no command"), "{err}");
    let mut o2 = opts.clone();
    o2.valgrind = Some("/no/such/valgrind".into());
    let err = record::record(&["/bin/true".into()], &o2, &mut |_| true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("apt-get install valgrind"), "{err}");
    assert!(!out.exists(), "no trace is left behind by a failed start");
}

#[test]
fn a_tool_directory_without_the_tool_is_a_clear_error() {
    if !available("a_tool_directory_without_the_tool_is_a_clear_error") {
        return;
    }
    let d = scratch("notool");
    let out = d.join("x.vtrace");
    let mut opts = RecordOptions::new(out.to_str().unwrap());
    opts.tool_dir = Some(d.to_str().unwrap().into());
    let err = record::record(&["/bin/true".into()], &opts, &mut |_| true)
        .unwrap_err()
        .to_string();
    assert!(err.contains("make -C tools/vg-memtrace"), "{err}");
    assert!(!out.exists(), "no trace is left behind by a failed start");
}

/// Runs `test` of this file in a child process with an empty `PATH` (no Valgrind, no gcc) and
/// `env` set (`CI` and `VMMU_SKIP_VALGRIND` cleared first); whether it passed, and its output.
fn child_without_valgrind(test: &str, env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env("PATH", "")
        .env_remove("CI")
        .env_remove("VMMU_SKIP_VALGRIND");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn under_ci_a_missing_valgrind_fails_even_with_a_skip_reason() {
    let test = "without_fetches_the_instruction_count_is_kept";
    let (passed, out) = child_without_valgrind(
        test,
        &[
            ("CI", "true"),
            ("VMMU_SKIP_VALGRIND", "a reason CI must not accept"),
        ],
    );
    assert!(!passed, "{out}");
    assert!(out.contains("valgrind"), "{out}");
    let (passed, out) = child_without_valgrind(test, &[("VMMU_SKIP_VALGRIND", "no valgrind here")]);
    assert!(passed, "{out}");
    assert!(out.contains(&format!("SKIPPED {test}")), "{out}");
    let (passed, out) = child_without_valgrind(test, &[]);
    assert!(!passed, "{out}");
}

/// Compiles `src` with `vmmu.h` (the phase marker) on the include path.
fn compile_with_vmmu_h(dir: &Path, name: &str, src: &str, extra: &[&str]) -> PathBuf {
    let inc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/vg-memtrace");
    let mut args = vec!["-I", inc.to_str().unwrap()];
    args.extend_from_slice(extra);
    compile(dir, name, src, &args)
}

/// Where the phase markers are: (event index, id), in order.
fn phases(ev: &[Event]) -> Vec<(usize, u32)> {
    ev.iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Event::Phase { id } => Some((i, *id)),
            _ => None,
        })
        .collect()
}

/// Checks that every dependence in `ev` points, within its thread, at a data reference that
/// loaded a value (a load or a modify, never a store); returns how many it checked.
fn dependences_point_at_loads(ev: &[Event]) -> usize {
    use std::collections::HashMap;
    let mut history: HashMap<(u32, u32), Vec<AccessKind>> = HashMap::new();
    let (mut pid, mut tid) = (0, 0);
    let mut checked = 0;
    for (i, e) in ev.iter().enumerate() {
        match *e {
            Event::ProcessCreate { pid: p } if pid == 0 => (pid, tid) = (p, p),
            Event::Switch { pid: p } => (pid, tid) = (p, p),
            Event::Thread { pid: p, tid: t } => (pid, tid) = (p, t),
            // After a running thread's exit, its process's main thread runs.
            Event::ThreadExit { pid: p, tid: t } if t == tid => (pid, tid) = (p, p),
            // The exec'd image starts its own count (its dependences never reach back).
            Event::Exec { .. } | Event::Fork { .. } => {}
            Event::Ref(r) if !r.kind.is_fetch() => {
                let h = history.entry((pid, tid)).or_default();
                if r.dep != 0 {
                    let k = r.dep as usize;
                    assert!(k <= h.len(), "event {i}: dep {k} with {} before", h.len());
                    let target = h[h.len() - k];
                    assert!(
                        matches!(target, AccessKind::Load | AccessKind::Modify),
                        "event {i}: dep {k} points at a {target:?}"
                    );
                    checked += 1;
                }
                h.push(r.kind);
            }
            _ => {}
        }
    }
    checked
}

/// How many data references in `ev` fall in `[lo, lo+len)`, by dependence.
fn deps_in(ev: &[Event], lo: u64, len: u64) -> std::collections::BTreeMap<u8, usize> {
    let mut m = std::collections::BTreeMap::new();
    for (_, r) in refs(ev) {
        if !r.kind.is_fetch() && r.va.raw() >= lo && r.va.raw() < lo + len {
            *m.entry(r.dep).or_default() += 1;
        }
    }
    m
}

const DEPS: &str = r#"
#include <stdio.h>
#include "vmmu.h"
#define N 4096
#define STEPS 1000
static long a[N];
static long b[N];
int main(int argc, char **argv) {
    for (long i = 0; i < N; i++)
        a[i] = i;
    unsigned long r = 12345;
    for (long i = N - 1; i > 0; i--) {   /* Sattolo: a is one cycle through all of it */
        r = r * 6364136223846793005UL + 1442695040888963407UL;
        long j = (r >> 33) % i;
        long t = a[i]; a[i] = a[j]; a[j] = t;
    }
    for (long i = 0; i < N; i++)
        b[i] = (i * 7) % N;
    FILE *f = fopen(argv[1], "w");
    fprintf(f, "%lx %lx\n%lx %lx\n", (unsigned long)a, (unsigned long)sizeof a,
            (unsigned long)b, (unsigned long)sizeof b);
    fclose(f);
    VMMU_PHASE(1);
    long x = 0;
    for (long s = 0; s < STEPS; s++)         /* a pointer chase */
        x = a[x];
    VMMU_PHASE(2);
    unsigned long q = 88172645463325252UL;   /* xorshift, in registers */
    long sum = 0;
    for (long s = 0; s < STEPS; s++) {       /* independent loads */
        q ^= q << 13; q ^= q >> 7; q ^= q << 17;
        sum += a[q & (N - 1)];
    }
    VMMU_PHASE(3);
    for (long i = 0; i < STEPS; i++)         /* a two-level indirection */
        sum += a[b[i]];
    VMMU_PHASE(4);
    for (long i = 0; i < STEPS; i++)         /* an index from two loads */
        sum += a[(b[i] + b[i + 1]) & (N - 1)];
    VMMU_PHASE(5);
    if (x + sum == 42)
        puts("");
    return 0;
}
"#;

#[test]
fn load_dependences_of_a_chase_random_loads_and_an_indirection_are_exact() {
    if !available("load_dependences_of_a_chase_random_loads_and_an_indirection_are_exact") {
        return;
    }
    let d = scratch("deps");
    let exe = compile_with_vmmu_h(&d, "deps", DEPS, &[]);
    let addrs = d.join("addrs");
    let out = d.join("deps.vtrace");
    let cmd = [exe.to_str().unwrap(), addrs.to_str().unwrap()];
    let (s, ev) = rec(&cmd, &RecordOptions::new(out.to_str().unwrap()));
    assert_eq!(s.exit_code, Some(0));
    assert!(s.dependences);
    assert!(vmmu_core::trace::open(out.to_str().unwrap())
        .unwrap()
        .tracks_dependences());
    let pairs = read_pairs(&addrs);
    let ((a, alen), (b, blen)) = (pairs[0], pairs[1]);
    // The markers land in program order, between the loops' references.
    let ph = phases(&ev);
    assert_eq!(
        ph.iter().map(|p| p.1).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5],
        "{ph:?}"
    );
    assert_eq!(s.phases, 5);
    let window = |k: usize| &ev[ph[k].0..ph[k + 1].0];
    let map = |v: &[(u8, usize)]| v.iter().copied().collect();
    // Pointer chase: each address is the previous load's value. The first's is the array's
    // base, which gcc keeps in a callee-saved register that the calls before it restored
    // with a `pop`: it depends on that load.
    let chase = deps_in(window(0), a, alen);
    assert_eq!(chase.get(&1), Some(&999), "{chase:?}");
    assert_eq!(chase.values().sum::<usize>(), 1000, "{chase:?}");
    assert_eq!(deps_in(window(0), b, blen), map(&[]));
    // Random loads: the index comes from registers only.
    assert_eq!(deps_in(window(1), a, alen), map(&[(0, 1000)]));
    // a[b[i]]: b[i] is independent, a[...] depends on the load just before it.
    assert_eq!(deps_in(window(2), b, blen), map(&[(0, 1000)]));
    assert_eq!(deps_in(window(2), a, alen), map(&[(1, 1000)]));
    // a[b[i] + b[i+1]]: the address depends on the younger of the two loads.
    assert_eq!(deps_in(window(3), b, blen), map(&[(0, 2000)]));
    assert_eq!(deps_in(window(3), a, alen), map(&[(1, 1000)]));
    // Before the first marker, a and b are written and shuffled with computed indices.
    let before = &ev[..ph[0].0];
    assert!(deps_in(before, a, alen).keys().all(|&k| k == 0));
    assert_eq!(deps_in(before, b, blen), map(&[(0, 4096)]));
    let dependent = refs(&ev).filter(|(_, r)| r.dep != 0).count() as u64;
    assert_eq!(s.dependent_refs, dependent);
    assert_eq!(dependences_point_at_loads(&ev) as u64, dependent);
    check_ok(out.to_str().unwrap());

    // Untracked: every dependence is 0 and the trace says they are unknown; the markers stay.
    let out2 = d.join("nodeps.vtrace");
    let mut o = RecordOptions::new(out2.to_str().unwrap());
    o.deps = false;
    let (s2, ev2) = rec(&cmd, &o);
    assert!(!s2.dependences);
    assert_eq!(s2.dependent_refs, 0);
    assert!(refs(&ev2).all(|(_, r)| r.dep == 0));
    assert!(!vmmu_core::trace::open(out2.to_str().unwrap())
        .unwrap()
        .tracks_dependences());
    assert_eq!(phases(&ev2).len(), 5);
    assert_eq!(
        (s2.loads, s2.stores, s2.modifies),
        (s.loads, s.stores, s.modifies)
    );
}

const THREAD_CHASE: &str = r#"
#include <pthread.h>
#include <stdio.h>
#define N 4096
#define STEPS 300000
static long a[2][N];
static volatile int turn, done[2];
/* futex(2) by a bare syscall: no call, so no register is saved and restored through memory. */
static inline __attribute__((always_inline)) void futex(volatile int *w, long op, long val) {
    long ret;
    register long r10 __asm__("r10") = 0;
    __asm__ volatile("syscall" : "=a"(ret)
                     : "0"(202L), "D"(w), "S"(op), "d"(val), "r"(r10)
                     : "rcx", "r11", "memory");
}
/* Each thread chases its own array, handing the CPU to the other every 65536 loads. */
static void *chase(void *p) {
    int k = p == a[1];
    long *arr = p, x = 0;
    while (turn != k && !done[1 - k])
        futex(&turn, 0, 1 - k);
    for (long s = 0; s < STEPS; s++) {
        x = arr[x];
        if ((s & 0xffff) == 0xffff) {
            turn = 1 - k;
            futex(&turn, 1, 1);
            while (turn != k && !done[1 - k])
                futex(&turn, 0, 1 - k);
        }
    }
    done[k] = 1;
    turn = 1 - k;
    futex(&turn, 1, 1);
    return (void *)x;
}
int main(int argc, char **argv) {
    unsigned long r = 99;
    for (int k = 0; k < 2; k++) {
        for (long i = 0; i < N; i++)
            a[k][i] = i;
        for (long i = N - 1; i > 0; i--) {
            r = r * 6364136223846793005UL + 1442695040888963407UL;
            long j = (r >> 33) % i;
            long t = a[k][i]; a[k][i] = a[k][j]; a[k][j] = t;
        }
    }
    FILE *f = fopen(argv[1], "w");
    fprintf(f, "%lx %lx\n", (unsigned long)a, (unsigned long)sizeof a[0]);
    fclose(f);
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        pthread_create(&t[k], 0, chase, a[k]);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], 0);
    return 0;
}
"#;

#[test]
fn dependences_count_back_within_each_thread_when_threads_interleave() {
    if !available("dependences_count_back_within_each_thread_when_threads_interleave") {
        return;
    }
    let d = scratch("depthreads");
    let exe = compile(&d, "dt", THREAD_CHASE, &["-pthread"]);
    let addrs = d.join("addrs");
    let out = d.join("dt.vtrace");
    let (s, ev) = rec(
        &[exe.to_str().unwrap(), addrs.to_str().unwrap()],
        &RecordOptions::new(out.to_str().unwrap()),
    );
    assert_eq!(s.exit_code, Some(0));
    let (a, len) = read_pairs(&addrs)[0];
    // Per worker thread: its data references so far, and for each load of the chase its
    // index among them and its dependence (the main thread shuffles the arrays).
    let pid = match ev[0] {
        Event::ProcessCreate { pid } => pid,
        ref e => panic!("the trace starts with {e:?}"),
    };
    let mut cur = pid;
    let mut count: std::collections::BTreeMap<u32, usize> = Default::default();
    let mut chase: std::collections::BTreeMap<(u32, u64), Vec<(usize, u8)>> = Default::default();
    let mut resumed = 0;
    for e in &ev {
        match *e {
            Event::Thread { tid, .. } => {
                cur = tid;
                resumed += chase.keys().any(|k| k.0 == cur) as usize;
            }
            Event::ThreadExit { tid, .. } if tid == cur => cur = pid,
            Event::Ref(r) if cur != pid && !r.kind.is_fetch() => {
                let n = count.entry(cur).or_default();
                if r.kind == AccessKind::Load && r.va.raw() >= a && r.va.raw() < a + 2 * len {
                    let k = (r.va.raw() - a) / len;
                    chase.entry((cur, k)).or_default().push((*n, r.dep));
                }
                *n += 1;
            }
            _ => {}
        }
    }
    assert_eq!(chase.len(), 2, "{:?}", chase.keys());
    assert_ne!(
        chase.keys().next().unwrap().1,
        chase.keys().last().unwrap().1
    );
    assert!(resumed >= 8, "the chases interleave: {resumed} resumptions");
    for (key, loads) in &chase {
        assert_eq!(loads.len(), 300_000, "{key:?}");
        // Every load after the first depends on the one before, however many of the thread's
        // references (the hand-over's) came in between, and whatever the other thread did.
        for w in loads.windows(2) {
            assert_eq!(w[1].1 as usize, w[1].0 - w[0].0, "{key:?}: {w:?}");
        }
        let far = loads.windows(2).filter(|w| w[1].1 > 1).count();
        assert!((4..=5).contains(&far), "{key:?}: {far} hand-overs");
    }
    assert!(dependences_point_at_loads(&ev) > 600_000);
}

const MADVISE: &str = r#"
#include <stdio.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
    size_t len = 8 << 20;
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int h = madvise(p, 4 << 20, MADV_HUGEPAGE);
    int dn = madvise(p + (4 << 20), 8192, MADV_DONTNEED);
    int bad = madvise(p + 1, 4096, MADV_DONTNEED);   /* EINVAL: not recorded */
    void *huge = mmap(0, 2 << 20, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    for (size_t off = 0; off < len; off += 4096)
        p[off] = 1;
    FILE *f = fopen(argv[1], "w");
    fprintf(f, "%lx %lx\n%x %x\n%x %lx\n", (unsigned long)p, (unsigned long)len, h, dn, bad,
            huge == MAP_FAILED ? 0UL : (unsigned long)huge);
    fclose(f);
    return 0;
}
"#;

#[test]
fn successful_madvise_calls_are_recorded_with_their_arguments_in_both_layouts() {
    if !available("successful_madvise_calls_are_recorded_with_their_arguments_in_both_layouts") {
        return;
    }
    use vmmu_core::event::Advice;
    let d = scratch("madvise");
    let exe = compile(&d, "ma", MADVISE, &[]);
    let addrs = d.join("addrs");
    let cmd = [exe.to_str().unwrap(), addrs.to_str().unwrap()];
    for native in [false, true] {
        let out = d.join(format!("ma-{native}.vtrace"));
        let mut o = RecordOptions::new(out.to_str().unwrap());
        o.native_layout = native;
        let (s, ev) = rec(&cmd, &o);
        assert_eq!(s.exit_code, Some(0));
        let pairs = read_pairs(&addrs);
        let ((p, len), (h, dn), (bad, huge)) = (pairs[0], pairs[1], pairs[2]);
        assert_eq!(bad, 0xffff_ffff, "the unaligned madvise fails");
        // The 8 MiB mapping, where the trace put it.
        let (im, start) = ev
            .iter()
            .enumerate()
            .find_map(|(i, e)| match e {
                Event::Mmap(m)
                    if m.len == len
                        && m.flags.0 & MapFlags::STACK == 0
                        && (native || m.start.raw() == p) =>
                {
                    Some((i, m.start.raw()))
                }
                _ => None,
            })
            .expect("the mmap is in the trace");
        let advised: Vec<(usize, Event)> = ev
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                matches!(e, Event::Madvise(m) if m.start.raw() >= start && m.start.raw() < start + len)
            })
            .map(|(i, e)| (i, e.clone()))
            .collect();
        let mut expect = Vec::new();
        if h == 0 {
            expect.push(Event::madvise(
                Gva::new(start),
                4 << 20,
                Advice(Advice::HUGEPAGE),
            ));
        }
        if dn == 0 {
            expect.push(Event::madvise(
                Gva::new(start + (4 << 20)),
                8192,
                Advice(Advice::DONTNEED),
            ));
        }
        assert!(!expect.is_empty(), "madvise failed natively under Valgrind");
        assert_eq!(
            advised.iter().map(|x| x.1.clone()).collect::<Vec<_>>(),
            expect,
            "native layout {native}"
        );
        assert!(advised.iter().all(|x| x.0 > im));
        if huge != 0 {
            // MAP_HUGETLB reaches the mapping's flags (where huge pages are reserved).
            assert!(ev.iter().any(|e| matches!(e,
                Event::Mmap(m) if m.len == 2 << 20 && m.flags.0 & MapFlags::HUGE != 0)));
        } else {
            let _ = writeln!(
                std::io::stderr(),
                "note: MAP_HUGETLB failed here (no huge pages reserved): its flag is not checked"
            );
        }
        check_ok(out.to_str().unwrap());
    }
}
