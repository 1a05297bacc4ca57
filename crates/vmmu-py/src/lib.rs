//! Thin PyO3 bindings for vmmu-core (being written).
