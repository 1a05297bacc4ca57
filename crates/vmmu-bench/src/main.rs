//! `make bench`: the engine's speed on the figures of its performance targets
//! (docs/performance.md), each printed beside its target with the ratio, and written to
//! `results/bench.json` so that two commits can be compared (`make bench-compare BASE=rev`).
//!
//! ```text
//! vmmu-bench [--runs N] [--only NAME,...] [--json PATH] [--vmmu PATH] [--scale F]
//! vmmu-bench --list
//! vmmu-bench compare BASE.json NEW.json
//! ```
//!
//! Each figure is measured in a child process of its own (`--child NAME`), `--runs` times, and
//! the median is reported. A row set against another one — a floor against vmmu's row, an
//! interval row against its additive row — is measured with it, one run of each in turn per
//! round, and their ratio is the median of each round's. Figures are wall clock on one core
//! (replay also uses a reader thread): on a shared machine they are noisy, so the load average
//! at start and end is written with them.

mod floor;
mod floor_nested;
mod report;
mod rows;

use report::Figure;
use rows::{Env, Kind, Target, ROWS};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, ExitCode};

struct Args {
    runs: usize,
    only: Vec<String>,
    json: Option<PathBuf>,
    vmmu: Option<PathBuf>,
    scale: f64,
    dir: Option<PathBuf>,
    child: Option<String>,
}

const USAGE: &str =
    "usage: vmmu-bench [--runs N] [--only NAME,...] [--json PATH] [--vmmu PATH] [--scale F]
       vmmu-bench --list
       vmmu-bench compare BASE.json NEW.json";

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        runs: 1,
        only: Vec::new(),
        json: None,
        vmmu: None,
        scale: 1.0,
        dir: None,
        child: None,
    };
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--runs" => {
                a.runs = value("--runs")?
                    .parse()
                    .map_err(|_| "--runs takes a positive number")?;
                if a.runs == 0 {
                    return Err("--runs takes a positive number".into());
                }
            }
            "--only" => {
                a.only = value("--only")?.split(',').map(str::to_string).collect();
                if let Some(bad) = a.only.iter().find(|n| rows::find(n).is_none()) {
                    return Err(format!("no figure `{bad}` (--list names them)"));
                }
            }
            "--json" => a.json = Some(value("--json")?.into()),
            "--vmmu" => a.vmmu = Some(value("--vmmu")?.into()),
            "--scale" => {
                a.scale = value("--scale")?
                    .parse()
                    .ok()
                    .filter(|s: &f64| *s > 0.0 && *s <= 1.0)
                    .ok_or("--scale takes a number in (0, 1]")?;
            }
            "--dir" => a.dir = Some(value("--dir")?.into()),
            "--child" => a.child = Some(value("--child")?),
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    Ok(a)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn git_commit() -> String {
    let out = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => "unknown".to_string(),
    }
}

/// Measures one figure in this process and prints it as one JSON line.
fn child(name: &str, env: &Env) -> ExitCode {
    let row = rows::find(name).expect("checked by the parent");
    match rows::measure(row, env) {
        Ok(m) => {
            let extra: serde_json::Map<String, Value> = m
                .extra
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            let line = json!({
                "value": m.value,
                "count": m.count,
                "secs": m.secs,
                "cpu_s": rows::cpu_seconds(),
                "peak_rss_mib": rows::peak_rss_mib(),
                "target": m.target,
                "extra": extra,
            });
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{}", json!({ "error": e.to_string() }));
            ExitCode::FAILURE
        }
    }
}

/// Runs the child for `row` once; returns its JSON line.
fn run_child(name: &str, args: &Args, env: &Env) -> Value {
    let exe = std::env::current_exe().expect("the bench's own path");
    let mut cmd = Command::new(exe);
    cmd.args(["--child", name, "--scale", &args.scale.to_string()])
        .arg("--dir")
        .arg(&env.dir);
    if let Some(v) = &env.vmmu {
        cmd.arg("--vmmu").arg(v);
    }
    match cmd.output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            text.lines()
                .last()
                .and_then(|l| serde_json::from_str(l).ok())
                .unwrap_or_else(|| {
                    json!({ "error": format!("no result ({}): {}", out.status,
                        String::from_utf8_lossy(&out.stderr).trim()) })
                })
        }
        Err(e) => json!({ "error": format!("cannot start the child: {e}") }),
    }
}

/// The figure of `row` from its runs' JSON lines (`samples`, one per round), its target read
/// from the figures measured before it (`figs`).
fn figure(row: &'static rows::Row, samples: Vec<Value>, figs: &[Figure]) -> Figure {
    let rounds: Vec<(Option<f64>, Option<f64>)> = samples
        .iter()
        .map(|d| (d["value"].as_f64(), d["extra"]["per_cpu_s"].as_f64()))
        .collect();
    let targets: Vec<f64> = samples
        .iter()
        .filter_map(|d| d["target"].as_f64())
        .collect();
    let earlier = |name: &str| {
        figs.iter()
            .find(|f| f.row.name == name)
            .and_then(|f| f.value())
    };
    let target = match row.target {
        Target::Fixed(t) => Some(t),
        Target::Measured => report::median(&targets),
        Target::Figure(name, factor) => earlier(name).map(|v| v * factor),
        Target::Interval(name) => earlier(name).map(|v| v * rows::INTERVAL_RATE),
        Target::None => None,
    };
    Figure {
        row,
        target,
        detail: samples.into_iter().last().unwrap_or(Value::Null),
        rounds,
    }
}

fn bench(args: &Args) -> ExitCode {
    let dir = std::env::temp_dir().join(format!("vmmu-bench-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("vmmu-bench: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let env = Env {
        dir: dir.clone(),
        scale: args.scale,
        vmmu: args.vmmu.clone(),
    };
    let start_load = loadavg();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "vmmu bench · {} · {cpus} cpus · load average {start_load} · median of {} run(s) · wall clock",
        git_commit(),
        args.runs
    );
    if args.scale != 1.0 {
        println!(
            "(scaled to {} of the real counts: figures are not comparable)",
            args.scale
        );
    }
    let selected: Vec<&'static rows::Row> = ROWS
        .iter()
        .filter(|r| args.only.is_empty() || args.only.iter().any(|n| n == r.name))
        .collect();
    let is_selected = |name: &str| selected.iter().any(|r| r.name == name);
    let mut figs: Vec<Figure> = Vec::new();
    for &row in &selected {
        // A row set against another one is measured with it, in alternation.
        if row.set_against().is_some_and(is_selected) {
            continue;
        }
        let group: Vec<&'static rows::Row> = std::iter::once(row)
            .chain(
                selected
                    .iter()
                    .copied()
                    .filter(|r| r.set_against() == Some(row.name)),
            )
            .collect();
        let mut samples: Vec<Vec<Value>> = vec![Vec::new(); group.len()];
        for _ in 0..args.runs {
            for (r, s) in group.iter().zip(samples.iter_mut()) {
                s.push(run_child(r.name, args, &env));
            }
        }
        for (r, s) in group.into_iter().zip(samples) {
            let f = figure(r, s, &figs);
            report::print_line(&f);
            if let Some(of) = r.set_against() {
                let base = figs.iter().find(|g| g.row.name == of);
                match r.kind {
                    Kind::Floor { .. } => report::print_floor(&f, base),
                    _ => report::print_interval(&f, base),
                }
            }
            figs.push(f);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let end_load = loadavg();
    println!("load average at end {end_load}");
    if let Some(path) = &args.json {
        let context = json!({
            "commit": git_commit(),
            "cpus": cpus,
            "loadavg_start": start_load,
            "loadavg_end": end_load,
            "runs": args.runs,
            "scale": args.scale,
        });
        let doc = report::to_json(&figs, context);
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(parent);
        }
        let text = serde_json::to_string_pretty(&doc).expect("JSON");
        if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("vmmu-bench: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

fn read_json(path: &str) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("compare") {
        let [_, base, new] = argv.as_slice() else {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        };
        return match (read_json(base), read_json(new)) {
            (Ok(b), Ok(n)) => {
                report::compare(&b, &n);
                ExitCode::SUCCESS
            }
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("vmmu-bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // `--list` wins wherever it stands, so `make bench BENCH_ARGS=--list` (which puts `--vmmu`
    // and `--json` first) lists the figures.
    if argv.iter().any(|a| a == "--list") {
        for r in ROWS {
            println!("{:<28} {}", r.name, r.label);
        }
        return ExitCode::SUCCESS;
    }
    let args = match parse_args(argv.into_iter()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("vmmu-bench: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(name) = &args.child {
        if rows::find(name).is_none() {
            eprintln!("vmmu-bench: no figure `{name}`");
            return ExitCode::from(2);
        }
        let env = Env {
            dir: args.dir.clone().unwrap_or_else(std::env::temp_dir),
            scale: args.scale,
            vmmu: args.vmmu.clone(),
        };
        return child(name, &env);
    }
    bench(&args)
}
