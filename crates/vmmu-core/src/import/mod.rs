//! Traces from other tools: ChampSim's instruction traces (read and written).
//!
//! Imported traces have no address-space events: the guest OS model maps each page as
//! anonymous memory on first touch (docs/recording.md, "ChampSim traces").

pub mod champsim;

pub use champsim::{sniff_champsim, ChampSimReader, ChampSimWriter};
