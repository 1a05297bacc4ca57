//! The oracle's schedule: the best paging mode for every window with hindsight, switch costs
//! included — dynamic programming over the per-window cycles of both modes, simulated on the
//! same events (the lockstep runs and the stitched result are in `result::oracle`). It is the
//! best schedule of per-window modes priced by the static runs' windows, an estimate and not a
//! bound on a policy that switches inside a window (docs/policies.md, "The oracle").
//!
//! A schedule runs window `k` in one mode; changing mode between windows `k − 1` and `k`
//! costs the switch's estimated cycles at that boundary. The schedule minimises the sum. The
//! first window's mode is free (the VM is configured in it). Ties keep the mode (no switch
//! for nothing), and between the two modes favour shadow paging, so the result is
//! deterministic.

use crate::config::VirtMode;

/// The cycles of one window in each mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCost {
    /// Under shadow paging.
    pub shadow: u64,
    /// Under nested paging.
    pub nested: u64,
}

/// The cost of switching into each mode at the boundary before a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCost {
    /// Nested → shadow.
    pub to_shadow: u64,
    /// Shadow → nested.
    pub to_nested: u64,
}

/// The cheapest schedule: the mode of every window, and its total cycles (windows and
/// switches). `switches[k]` prices the boundary before window `k` (`switches[0]` is unused).
pub fn schedule(windows: &[WindowCost], switches: &[SwitchCost]) -> (Vec<VirtMode>, u64) {
    assert_eq!(windows.len(), switches.len(), "one switch price per window");
    if windows.is_empty() {
        return (Vec::new(), 0);
    }
    // Index 0: shadow, 1: nested. `came[k][m]`: window k − 1's mode on the best path to
    // window k in mode m.
    let cost = |w: &WindowCost, m: usize| if m == 0 { w.shadow } else { w.nested };
    let into = |s: &SwitchCost, m: usize| if m == 0 { s.to_shadow } else { s.to_nested };
    let mut best = [cost(&windows[0], 0), cost(&windows[0], 1)];
    let mut came = vec![[0usize, 1usize]; windows.len()];
    for k in 1..windows.len() {
        let mut next = [0u64; 2];
        for m in 0..2 {
            let stay = best[m];
            let switch = best[1 - m] + into(&switches[k], m);
            let (from, c) = if switch < stay {
                (1 - m, switch)
            } else {
                (m, stay)
            };
            came[k][m] = from;
            next[m] = c + cost(&windows[k], m);
        }
        best = next;
    }
    let mut m = if best[1] < best[0] { 1 } else { 0 };
    let total = best[m];
    let mut modes = vec![VirtMode::Shadow; windows.len()];
    for k in (0..windows.len()).rev() {
        modes[k] = if m == 0 {
            VirtMode::Shadow
        } else {
            VirtMode::Nested
        };
        m = came[k][m];
    }
    (modes, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(shadow: u64, nested: u64) -> WindowCost {
        WindowCost { shadow, nested }
    }

    fn flat(n: usize, to_shadow: u64, to_nested: u64) -> Vec<SwitchCost> {
        vec![
            SwitchCost {
                to_shadow,
                to_nested
            };
            n
        ]
    }

    #[test]
    fn one_mode_best_throughout_is_chosen_throughout() {
        let ws = [w(10, 20), w(11, 30), w(12, 13)];
        assert_eq!(
            schedule(&ws, &flat(3, 0, 0)),
            (vec![VirtMode::Shadow; 3], 33)
        );
    }

    #[test]
    fn a_phase_change_worth_more_than_the_switch_is_taken() {
        let ws = [w(10, 20), w(10, 20), w(50, 20), w(50, 20)];
        let (modes, total) = schedule(&ws, &flat(4, 5, 7));
        assert_eq!(
            modes,
            [
                VirtMode::Shadow,
                VirtMode::Shadow,
                VirtMode::Nested,
                VirtMode::Nested
            ]
        );
        assert_eq!(total, 10 + 10 + 7 + 20 + 20);
    }

    #[test]
    fn a_phase_change_worth_less_than_the_switch_is_not() {
        let ws = [w(10, 20), w(30, 20), w(10, 20)];
        // Two switches (5 + 7) cost more than the 10 cycles the middle window would save.
        let (modes, total) = schedule(&ws, &flat(3, 5, 7));
        assert_eq!(modes, vec![VirtMode::Shadow; 3]);
        assert_eq!(total, 50);
    }

    #[test]
    fn the_first_window_is_free_to_choose() {
        let ws = [w(100, 1), w(100, 1)];
        assert_eq!(
            schedule(&ws, &flat(2, 1000, 1000)),
            (vec![VirtMode::Nested; 2], 2)
        );
    }

    #[test]
    fn ties_keep_the_mode_and_favour_shadow() {
        let ws = [w(5, 5), w(5, 5)];
        assert_eq!(
            schedule(&ws, &flat(2, 0, 0)),
            (vec![VirtMode::Shadow; 2], 10)
        );
    }
}
