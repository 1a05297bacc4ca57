//! Positions in the 2D walk grid of seed 002 Figure 1(b).
//!
//! Columns are the nested levels `nL5..nL1` plus `G` (the guest entry itself); rows are the
//! guest levels `gL5..gL1` plus `gPA` (the final nested walk of the data's guest-physical
//! address). A native walk uses only column `G`, and its rows are named `L4..L1`.

/// Column index of the guest entry (`G`); nested levels `nLk` are columns `k` (1..=5).
pub const COL_G: usize = 0;
/// Row index of the final data translation (`gPA`); guest levels `gLk` are rows `k` (1..=5).
pub const ROW_GPA: usize = 0;
/// Number of columns and of rows in the grid.
pub const GRID: usize = 6;

/// Counts per `{column,row}` cell.
pub type Grid = [[u64; GRID]; GRID];

/// The name of a cell: `"G,gL4"`, `"nL1,gPA"`, … in nested mode; `"L4"` … in native mode.
pub fn step_name(col: usize, row: usize, native: bool) -> String {
    use std::fmt::Write;
    // One allocation per name: results name every used cell, at every oracle window.
    let mut s = String::with_capacity(8);
    if native {
        debug_assert_eq!(col, COL_G);
        let _ = write!(s, "L{row}");
        return s;
    }
    if col == COL_G {
        s.push('G');
    } else {
        let _ = write!(s, "nL{col}");
    }
    s.push(',');
    if row == ROW_GPA {
        s.push_str("gPA");
    } else {
        let _ = write!(s, "gL{row}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_seed_002_figure_1b() {
        assert_eq!(step_name(COL_G, 4, false), "G,gL4");
        assert_eq!(step_name(1, ROW_GPA, false), "nL1,gPA");
        assert_eq!(step_name(4, 3, false), "nL4,gL3");
        assert_eq!(step_name(COL_G, 2, true), "L2");
    }
}
