//! # vmmu-py — thin PyO3 bindings for vmmu-core
//!
//! The native module `vmmu._core`. Every function here converts its arguments, delegates to
//! vmmu-core and maps errors (STYLE.md rule 8); results cross the boundary as JSON text, which
//! the Python package (`python/vmmu/`) decodes. Long calls release the GIL and come back for it
//! only in the progress callback (about once per million events), where a pending Ctrl-C stops
//! the run cleanly with [`Interrupted`].
//!
//! Each [`vmmu_core::Error`] variant has its own Python exception class under `VmmuError`,
//! re-exported from `vmmu.exceptions`; the message is the core's `Display` text, which names the
//! field, line or byte offset.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vmmu_core::error::Error;
use vmmu_core::{config, trace, workload};
use vmmu_record as rec;

create_exception!(
    _core,
    VmmuError,
    PyException,
    "Base class of every vmmu error."
);
create_exception!(
    _core,
    ConfigError,
    VmmuError,
    "An impossible or unknown configuration value; the message names the dotted field."
);
create_exception!(
    _core,
    WorkloadError,
    VmmuError,
    "A workload specification that cannot be understood."
);
create_exception!(
    _core,
    TraceError,
    VmmuError,
    "A malformed text trace line or a corrupt binary trace (names the line or byte offset)."
);
create_exception!(
    _core,
    AddressError,
    VmmuError,
    "An address the model cannot accept (non-canonical, out of range)."
);
create_exception!(
    _core,
    EventError,
    VmmuError,
    "An OS event that cannot happen."
);
create_exception!(
    _core,
    OutOfMemoryError,
    VmmuError,
    "Simulated guest or host physical memory is exhausted."
);
create_exception!(
    _core,
    CheckError,
    VmmuError,
    "The checked mode found a wrong translation."
);
create_exception!(
    _core,
    Interrupted,
    VmmuError,
    "The run was stopped by Ctrl-C or by the progress callback."
);
create_exception!(
    _core,
    VmmuIOError,
    VmmuError,
    "A file could not be read or written."
);

/// Maps a core error to its Python exception; the message is the core's `Display` text.
fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Config { .. } => ConfigError::new_err(msg),
        Error::Workload { .. } => WorkloadError::new_err(msg),
        Error::TraceLine { .. } | Error::TraceCorrupt { .. } => TraceError::new_err(msg),
        Error::Address { .. } => AddressError::new_err(msg),
        Error::Event { .. } => EventError::new_err(msg),
        Error::OutOfMemory { .. } => OutOfMemoryError::new_err(msg),
        Error::Check { .. } => CheckError::new_err(msg),
        Error::Interrupted { .. } => Interrupted::new_err(msg),
        Error::Io { .. } => VmmuIOError::new_err(msg),
    }
}

/// Carries a Python progress callback into GIL-free code. `report` takes the GIL, turns a
/// pending signal (Ctrl-C) into a stop, and calls the callback with `(done, total)`; the
/// callback returning `False` stops the run, and an exception it raises is kept and re-raised.
struct Reporter<'a> {
    callback: Option<&'a Py<PyAny>>,
    raised: Option<PyErr>,
}

impl<'a> Reporter<'a> {
    fn new(callback: Option<&'a Py<PyAny>>) -> Self {
        Reporter {
            callback,
            raised: None,
        }
    }

    fn report(&mut self, done: u64, total: Option<u64>) -> bool {
        self.call(|py, cb| cb.call1(py, (done, total)))
    }

    /// Takes the GIL, checks for Ctrl-C, then calls the callback through `call` (if there is
    /// one); `None` or a true value continues, `False` or an exception stops.
    fn call(&mut self, call: impl FnOnce(Python<'_>, &Py<PyAny>) -> PyResult<PyObject>) -> bool {
        Python::with_gil(|py| {
            if let Err(e) = py.check_signals() {
                self.raised = Some(e);
                return false;
            }
            let Some(cb) = self.callback else {
                return true;
            };
            match call(py, cb) {
                Ok(r) => r.is_none(py) || r.bind(py).is_truthy().unwrap_or(true),
                Err(e) => {
                    self.raised = Some(e);
                    false
                }
            }
        })
    }

    /// An exception the callback raised, if any (Ctrl-C excluded): for calls whose stop is a
    /// normal outcome rather than `Error::Interrupted`.
    fn callback_error(self, py: Python<'_>) -> Option<PyErr> {
        self.raised
            .filter(|e| !e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py))
    }

    /// The error to raise for `e`: an exception raised by the callback itself wins over the
    /// `Interrupted` it caused; Ctrl-C stays `Interrupted`.
    fn into_error(self, py: Python<'_>, e: Error) -> PyErr {
        match (e, self.raised) {
            (e @ Error::Interrupted { .. }, Some(raised))
                if raised.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) =>
            {
                to_py(e)
            }
            (Error::Interrupted { .. }, Some(raised)) => raised,
            (e, _) => to_py(e),
        }
    }
}

/// Runs one simulation and returns its result as JSON text (schema `vmmu.result/2`).
///
/// `machine` is a preset name or a `.toml` path; `overrides` are `(dotted.path, value)` pairs
/// applied in order; exactly one of `workload` (`NAME:k=v,...`) and `trace` (a path) is given.
#[pyfunction]
#[pyo3(signature = (machine, overrides, workload=None, trace=None, progress=None))]
fn run(
    py: Python<'_>,
    machine: &str,
    overrides: Vec<(String, String)>,
    workload: Option<&str>,
    trace: Option<&str>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let mut reporter = Reporter::new(progress.as_ref());
    let out = py.allow_threads(|| {
        let cfg = config::build(machine, &overrides)?;
        let mut source = match (workload, trace) {
            (Some(spec), None) => workload::open(spec)?,
            (None, Some(path)) => trace::open(path)?,
            _ => {
                return Err(Error::config(
                    "source",
                    "give exactly one of a workload and a trace",
                ))
            }
        };
        vmmu_core::run::run(
            &cfg,
            source.as_mut(),
            &mut |p: &vmmu_core::run::Progress| reporter.report(p.events, p.total),
        )
    });
    match out {
        Ok(r) => Ok(r.to_json().to_string()),
        Err(e) => Err(reporter.into_error(py, e)),
    }
}

/// The machine presets as `(name, description)` pairs.
#[pyfunction]
fn presets() -> PyResult<Vec<(String, String)>> {
    config::PRESETS
        .iter()
        .map(|(name, _)| {
            let m = config::load_machine(name).map_err(to_py)?;
            Ok((name.to_string(), m.description))
        })
        .collect()
}

/// The TOML text of the preset `name`.
#[pyfunction]
fn preset_toml(name: &str) -> PyResult<String> {
    match config::PRESETS.iter().find(|(n, _)| *n == name) {
        Some((_, text)) => Ok(text.to_string()),
        // Not a preset: load_machine gives the error naming the known presets (or reads a file).
        None => config::load_machine(name)
            .and_then(|_| std::fs::read_to_string(name).map_err(|e| Error::io(name, e)))
            .map_err(to_py),
    }
}

/// The exit cost profiles as `(name, description)`.
#[pyfunction]
fn profiles() -> PyResult<Vec<(String, String)>> {
    config::PROFILES
        .iter()
        .map(|(name, _)| {
            let p = config::load_profile(name).map_err(to_py)?;
            Ok((name.to_string(), p.description))
        })
        .collect()
}

/// The TOML text of the cost profile `name` (or of a `.toml` file, validated).
#[pyfunction]
fn profile_toml(name: &str) -> PyResult<String> {
    match config::PROFILES.iter().find(|(n, _)| *n == name) {
        Some((_, text)) => Ok(text.to_string()),
        None => config::load_profile(name)
            .and_then(|_| std::fs::read_to_string(name).map_err(|e| Error::io(name, e)))
            .map_err(to_py),
    }
}

/// The fully resolved, validated configuration as TOML text.
#[pyfunction]
fn config_toml(machine: &str, overrides: Vec<(String, String)>) -> PyResult<String> {
    config::build(machine, &overrides)
        .map(|c| c.to_toml())
        .map_err(to_py)
}

/// The workload generators with their parameters and defaults, as JSON text.
#[pyfunction]
fn workloads() -> PyResult<String> {
    Ok(serde_json::to_string(&workload::catalog()).expect("the catalog serializes"))
}

/// ``"did you mean `X`? "`` for the name of `known` nearest `name`, or `""`: the engine's hint
/// for an unknown name (`vmmu_core::error::did_you_mean`), for the names Python resolves.
#[pyfunction]
fn did_you_mean(name: &str, known: Vec<String>) -> String {
    vmmu_core::error::did_you_mean(name, known.iter().map(String::as_str))
}

/// Reads a trace to the end and returns its summary as JSON text.
#[pyfunction]
#[pyo3(signature = (path, progress=None))]
fn trace_info(py: Python<'_>, path: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let mut reporter = Reporter::new(progress.as_ref());
    let out = py.allow_threads(|| trace::info(path, &mut |n| reporter.report(n, None)));
    match out {
        Ok(info) => Ok(serde_json::to_string(&info).expect("trace info serializes")),
        Err(e) => Err(reporter.into_error(py, e)),
    }
}

/// Converts the trace `src` to `dst` in format `to` (`vtrace`, `lackey` or `champsim`; `None`:
/// the format `dst`'s name says); returns the summary of what was written as JSON text.
#[pyfunction]
#[pyo3(signature = (src, dst, to=None, progress=None))]
fn trace_convert(
    py: Python<'_>,
    src: &str,
    dst: &str,
    to: Option<&str>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let format: Option<trace::Format> = to.map(str::parse).transpose().map_err(to_py)?;
    let mut reporter = Reporter::new(progress.as_ref());
    let out =
        py.allow_threads(|| trace::convert(src, dst, format, &mut |n| reporter.report(n, None)));
    match out {
        Ok(info) => Ok(serde_json::to_string(&info).expect("trace info serializes")),
        Err(e) => Err(reporter.into_error(py, e)),
    }
}

/// Records `cmd` under Valgrind with the vg-memtrace tool into the trace `output`; returns
/// the summary as JSON text. `progress` is called about five times a second with a dict
/// (`refs`, `events`, `bytes_written`, `raw_bytes`, `compression_ratio`, `elapsed_s`);
/// returning `False` (or Ctrl-C) stops the command and finishes the trace as truncated.
#[pyfunction]
#[pyo3(signature = (
    cmd, output, no_instr=false, follow_children=false, native_layout=false, progress=None,
    tool_dir=None, valgrind=None, no_deps=false
))]
#[allow(clippy::too_many_arguments)]
fn record(
    py: Python<'_>,
    cmd: Vec<String>,
    output: String,
    no_instr: bool,
    follow_children: bool,
    native_layout: bool,
    progress: Option<Py<PyAny>>,
    tool_dir: Option<String>,
    valgrind: Option<String>,
    no_deps: bool,
) -> PyResult<String> {
    let mut opts = rec::RecordOptions::new(output);
    opts.no_instr = no_instr;
    opts.deps = !no_deps;
    opts.follow_children = follow_children;
    opts.native_layout = native_layout;
    opts.tool_dir = tool_dir;
    opts.valgrind = valgrind;
    let mut reporter = Reporter::new(progress.as_ref());
    let out = py.allow_threads(|| {
        rec::record(&cmd, &opts, &mut |p: &rec::RecordProgress| {
            reporter.call(|py, cb| {
                let d = PyDict::new(py);
                d.set_item("refs", p.refs)?;
                d.set_item("events", p.events)?;
                d.set_item("bytes_written", p.bytes_written)?;
                d.set_item("raw_bytes", p.raw_bytes)?;
                d.set_item("compression_ratio", p.compression_ratio)?;
                d.set_item("elapsed_s", p.elapsed_s)?;
                cb.call1(py, (d,))
            })
        })
    });
    match out {
        Ok(summary) => match reporter.callback_error(py) {
            Some(e) => Err(e),
            None => Ok(serde_json::to_string(&summary).expect("the summary serializes")),
        },
        Err(e) => Err(reporter.into_error(py, e)),
    }
}

/// Replays the trace at `path` and reports references outside every mapping of their process,
/// as JSON text.
#[pyfunction]
#[pyo3(signature = (path, progress=None))]
fn trace_check(py: Python<'_>, path: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let mut reporter = Reporter::new(progress.as_ref());
    let out = py.allow_threads(|| rec::check(path, &mut |n| reporter.report(n, None)));
    match out {
        Ok(report) => Ok(serde_json::to_string(&report).expect("the report serializes")),
        Err(e) => Err(reporter.into_error(py, e)),
    }
}

/// The native module `vmmu._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(preset_toml, m)?)?;
    m.add_function(wrap_pyfunction!(profiles, m)?)?;
    m.add_function(wrap_pyfunction!(profile_toml, m)?)?;
    m.add_function(wrap_pyfunction!(config_toml, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(did_you_mean, m)?)?;
    m.add_function(wrap_pyfunction!(trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(trace_convert, m)?)?;
    m.add_function(wrap_pyfunction!(trace_check, m)?)?;
    m.add_function(wrap_pyfunction!(record, m)?)?;
    m.add("VmmuError", py.get_type::<VmmuError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("WorkloadError", py.get_type::<WorkloadError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("AddressError", py.get_type::<AddressError>())?;
    m.add("EventError", py.get_type::<EventError>())?;
    m.add("OutOfMemoryError", py.get_type::<OutOfMemoryError>())?;
    m.add("CheckError", py.get_type::<CheckError>())?;
    m.add("Interrupted", py.get_type::<Interrupted>())?;
    m.add("VmmuIOError", py.get_type::<VmmuIOError>())?;
    Ok(())
}
