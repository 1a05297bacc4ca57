//! # vmmu-record — recording real programs
//!
//! Recording real programs (docs/recording.md): the raw record stream of the vg-memtrace
//! Valgrind tool (`tools/vg-memtrace/`), its decoding into [`Event`](vmmu_core::event::Event)s,
//! the merge of per-process streams into one guest trace, the `--native-layout` relocation,
//! `trace check`, and the pipeline behind `vmmu record -- CMD` that runs Valgrind and converts
//! its output on the fly.
//!
//! A crate of its own because it spawns processes and opens sockets: the engine
//! (`vmmu-core`) stays free of both and never depends on this crate; this crate reads and
//! writes traces through `vmmu_core::trace` and replays them through `vmmu_core::event`.
//!
//! What it simplifies: threads of a process are one stream in the order Valgrind ran them (no
//! thread events reach the model); the main stack is one mapping as large as its reservation;
//! the kernel's own references and the page cache are not seen.

#![warn(missing_docs)]

pub mod check;
pub mod layout;
mod live;
pub mod merge;
pub mod raw;
mod run;

pub use check::{check, check_source, CheckReport};
pub use layout::NativeLayout;
pub use live::LiveStreams;
pub use merge::{DirStreams, MergeStats, Merged, NotFollowed, StreamSet};
pub use run::{
    find_tool_dir, find_valgrind, record, resolve_command, RecordOptions, RecordProgress,
    RecordSummary, INSTALL_VALGRIND, TOOL, TOOL_FILE,
};

use std::path::Path;
use vmmu_core::error::Result;
use vmmu_core::event::EventSource;

/// Opens the streams of a recording made with `--out=dir:PATH` (one `*.vgmt` file per process
/// image) as one merged event stream, relocated to a native layout if asked.
pub fn open_dir(
    dir: &str,
    follow_children: bool,
    native_layout: bool,
) -> Result<Box<dyn EventSource>> {
    let merged = Merged::new(DirStreams::open(Path::new(dir))?, follow_children);
    Ok(if native_layout {
        Box::new(NativeLayout::new(merged))
    } else {
        Box::new(merged)
    })
}
