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
    if native {
        debug_assert_eq!(col, COL_G);
        return format!("L{row}");
    }
    let c = if col == COL_G {
        "G".to_string()
    } else {
        format!("nL{col}")
    };
    let r = if row == ROW_GPA {
        "gPA".to_string()
    } else {
        format!("gL{row}")
    };
    format!("{c},{r}")
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
