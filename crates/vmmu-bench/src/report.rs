//! Printing figures beside their targets, `results/bench.json`, and the figure-by-figure
//! comparison of two such files.

use crate::rows::{Kind, Row, Target, Unit, ROWS};
use serde_json::{json, Value};

/// The result of one figure over its runs.
#[derive(Clone, Debug)]
pub struct Figure {
    /// The row measured.
    pub row: &'static Row,
    /// The target the value is held to, when it has one.
    pub target: Option<f64>,
    /// The last run's JSON (count, seconds, extra figures), or why it failed.
    pub detail: Value,
    /// Each run's value and rate per CPU second, in the order of the bench's rounds (`None`
    /// where a run failed or has no such figure): a row set against another one is measured
    /// in alternation with it, so round `i` of both saw the same host.
    pub rounds: Vec<(Option<f64>, Option<f64>)>,
}

impl Figure {
    /// Each run's value, in the order of the rounds (empty when every run failed).
    pub fn runs(&self) -> Vec<f64> {
        self.rounds.iter().filter_map(|r| r.0).collect()
    }

    /// The median of the runs' values: the figure.
    pub fn value(&self) -> Option<f64> {
        median(&self.runs())
    }

    /// The median of the runs' rates per CPU second, where the figure has one.
    pub fn per_cpu_s(&self) -> Option<f64> {
        let c: Vec<f64> = self
            .rounds
            .iter()
            .filter_map(|r| r.1.filter(|c| *c > 0.0))
            .collect();
        median(&c)
    }
}

/// The median over the rounds both figures ran of `a`'s value over `b`'s (`per_cpu`: of their
/// rates per CPU second): each round's two runs saw the same host, so a ratio taken within a
/// round cancels the host's swings from one round to the next, which a ratio of two medians
/// keeps.
fn paired(a: &Figure, b: &Figure, per_cpu: bool) -> Option<f64> {
    let pick = |r: &(Option<f64>, Option<f64>)| if per_cpu { r.1 } else { r.0 };
    let ratios: Vec<f64> = a
        .rounds
        .iter()
        .zip(&b.rounds)
        .filter_map(|(x, y)| Some(pick(x)? / pick(y).filter(|v| *v > 0.0)?))
        .collect();
    median(&ratios)
}

/// The median of `v` (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    Some(if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    })
}

/// How far `value` is from `target`: above 1 means the target is met, whichever direction the
/// unit improves in (a rate over its target, a target time over the time).
pub fn target_ratio(unit: Unit, value: f64, target: f64) -> f64 {
    if unit.higher_is_better() {
        value / target
    } else {
        target / value
    }
}

fn fmt_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Prints one figure's line: value, unit, target, ratio.
pub fn print_line(f: &Figure) {
    let unit = f.row.unit.symbol();
    let Some(v) = f.value() else {
        let why = f.detail["error"].as_str().unwrap_or("failed");
        println!("{:<52} {:>9} {unit:<10}  ({why})", f.row.label, "—");
        return;
    };
    let runs = f.runs();
    let spread = if runs.len() > 1 {
        let lo = runs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!(
            "  [{}..{}, {} runs]",
            fmt_value(lo),
            fmt_value(hi),
            runs.len()
        )
    } else {
        String::new()
    };
    let target = match f.target {
        Some(t) => {
            let r = target_ratio(f.row.unit, v, t);
            let sign = if f.row.unit.higher_is_better() {
                "≥"
            } else {
                "≤"
            };
            let verdict = if r >= 1.0 { "meets" } else { "BELOW" };
            format!(
                "target {sign} {:>6}  ratio {r:>5.2}  {verdict}",
                fmt_value(t)
            )
        }
        None => "no target".to_string(),
    };
    // The same count over CPU seconds (the runs' median), with its ratio to the target: on a
    // loaded machine, time spent waiting for a core is in the wall-clock value but not in
    // this one.
    let cpu = match (f.per_cpu_s(), f.target) {
        (Some(c), Some(t)) => format!(
            "  per CPU s {} (ratio {:.2})",
            fmt_value(c),
            target_ratio(f.row.unit, c, t)
        ),
        (Some(c), None) => format!("  per CPU s {}", fmt_value(c)),
        _ => String::new(),
    };
    println!(
        "{:<52} {:>9} {unit:<10}  {target}{cpu}{spread}",
        f.row.label,
        fmt_value(v)
    );
}

/// The line under a floor's figure (`floor`), when the row it floors (`row`) was measured in
/// the same bench run: where the row's target stands against the floor — above it, no exact
/// model as lean as the floor meets the target on this host — and where vmmu stands.
pub fn print_floor(floor: &Figure, row: Option<&Figure>) {
    let Some((r, f)) = row.and_then(|r| Some((r, floor_ratios(floor, r)?))) else {
        return;
    };
    let target = match f.target_over_floor {
        Some(t) if t > 1.0 => {
            format!("the target is {t:.2}× this floor: beyond an exact model this lean here")
        }
        Some(t) => format!("the target is {t:.2} of this floor: within reach"),
        None => "no target".to_string(),
    };
    let cpu = f
        .per_cpu_s
        .map_or(String::new(), |c| format!(", {c:.2} per CPU s"));
    println!(
        "  └ floor of \"{}\": {target}; vmmu at {:.2} of it{cpu}",
        r.row.label, f.vmmu_over_floor
    );
}

/// The line under an interval row's figure (`interval`), when the row of the same workload
/// under the additive model (`additive`) was measured in the same bench run: the interval
/// model's rate over the additive one's, per second of wall clock and per CPU second.
pub fn print_interval(interval: &Figure, additive: Option<&Figure>) {
    let Some(r) = additive.and_then(|a| interval_ratios(interval, a)) else {
        return;
    };
    let cpu = r
        .per_cpu_s
        .map_or(String::new(), |c| format!(", {c:.2} per CPU s"));
    println!("  └ interval / additive: {:.2}{cpu}", r.wall);
}

/// An interval row's rates over those of its additive row.
struct IntervalRatios {
    /// Over wall clock, round by round ([`paired`]).
    wall: f64,
    /// Over CPU seconds, where both rows have the figure.
    per_cpu_s: Option<f64>,
}

fn interval_ratios(interval: &Figure, additive: &Figure) -> Option<IntervalRatios> {
    Some(IntervalRatios {
        wall: paired(interval, additive, false)?,
        per_cpu_s: paired(interval, additive, true),
    })
}

/// A floor's figure set against the row it floors.
struct FloorRatios {
    /// The row's target over the floor's value.
    target_over_floor: Option<f64>,
    /// The row's value (vmmu's) over the floor's, round by round ([`paired`]).
    vmmu_over_floor: f64,
    /// The same per CPU second, where both have the figure.
    per_cpu_s: Option<f64>,
}

fn floor_ratios(floor: &Figure, row: &Figure) -> Option<FloorRatios> {
    let fv = floor.value().filter(|v| *v > 0.0)?;
    Some(FloorRatios {
        target_over_floor: row.target.map(|t| t / fv),
        vmmu_over_floor: paired(row, floor, false)?,
        per_cpu_s: paired(row, floor, true),
    })
}

/// `results/bench.json`: schema `vmmu.bench/1`; each figure carries its value (the runs'
/// median), its runs and the median of their rates per CPU second (`per_cpu_s`); a floor's
/// figure also carries the row it floors (`floor_of`) and, where that row was measured,
/// `target_over_floor`, `vmmu_over_floor` and `vmmu_over_floor_per_cpu_s` (round by round:
/// [`paired`]); an interval row's, its additive row (`interval_of`) and, where that row was
/// measured, `interval_over_additive` and `interval_over_additive_per_cpu_s`.
pub fn to_json(figs: &[Figure], context: Value) -> Value {
    let figures: Vec<Value> = figs
        .iter()
        .map(|f| {
            let mut v = json!({
                "name": f.row.name,
                "label": f.row.label,
                "unit": f.row.unit.symbol(),
                "higher_is_better": f.row.unit.higher_is_better(),
                "value": f.value(),
                "runs": f.runs(),
                "per_cpu_s": f.per_cpu_s(),
                "target": f.target,
                "target_ratio": match (f.value(), f.target) {
                    (Some(v), Some(t)) => Some(target_ratio(f.row.unit, v, t)),
                    _ => None,
                },
                "detail": f.detail,
            });
            if let Kind::Floor { of, .. } = f.row.kind {
                v["floor_of"] = json!(of);
                let row = figs.iter().find(|g| g.row.name == of);
                if let Some(r) = row.and_then(|r| floor_ratios(f, r)) {
                    v["target_over_floor"] = json!(r.target_over_floor);
                    v["vmmu_over_floor"] = json!(r.vmmu_over_floor);
                    v["vmmu_over_floor_per_cpu_s"] = json!(r.per_cpu_s);
                }
            }
            if let Target::Interval(of) = f.row.target {
                v["interval_of"] = json!(of);
                let row = figs.iter().find(|g| g.row.name == of);
                if let Some(r) = row.and_then(|a| interval_ratios(f, a)) {
                    v["interval_over_additive"] = json!(r.wall);
                    v["interval_over_additive_per_cpu_s"] = json!(r.per_cpu_s);
                }
            }
            v
        })
        .collect();
    json!({ "schema": "vmmu.bench/1", "context": context, "figures": figures })
}

/// Per figure of a `results/bench.json`: name, value, whether higher is better, unit, and the
/// rate per CPU second where the figure has one.
type FigureValues = (String, Option<f64>, bool, String, Option<f64>);

fn figure_values(doc: &Value) -> Vec<FigureValues> {
    doc["figures"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| {
                    (
                        f["name"].as_str().unwrap_or("?").to_string(),
                        f["value"].as_f64(),
                        f["higher_is_better"].as_bool().unwrap_or(true),
                        f["unit"].as_str().unwrap_or("").to_string(),
                        f["per_cpu_s"]
                            .as_f64()
                            .or(f["detail"]["extra"]["per_cpu_s"].as_f64())
                            .filter(|c| *c > 0.0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Prints two bench results side by side, figure by figure: base, new, and the speed-up
/// (new over base for rates, base over new for time, memory and ratios of times: above 1 is
/// better), and the same speed-up of the figures per CPU second, which a loaded machine
/// disturbs least.
pub fn compare(base: &Value, new: &Value) {
    let describe = |d: &Value| {
        format!(
            "{} (load average {} at start)",
            d["context"]["commit"].as_str().unwrap_or("?"),
            d["context"]["loadavg_start"].as_str().unwrap_or("?")
        )
    };
    println!("base: {}", describe(base));
    println!("new:  {}", describe(new));
    println!(
        "{:<28} {:>10} {:>10} {:<10} {:>8} {:>12}",
        "figure", "base", "new", "unit", "speed-up", "per CPU s"
    );
    let b = figure_values(base);
    let n = figure_values(new);
    // Order: the current row list, then anything only one side has.
    let mut names: Vec<String> = ROWS.iter().map(|r| r.name.to_string()).collect();
    for (name, ..) in b.iter().chain(n.iter()) {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    for name in names {
        let bv = b.iter().find(|x| x.0 == name);
        let nv = n.iter().find(|x| x.0 == name);
        if bv.is_none() && nv.is_none() {
            continue;
        }
        let show =
            |x: Option<&FigureValues>| x.and_then(|x| x.1).map_or("—".to_string(), fmt_value);
        let unit = bv.or(nv).map_or("", |x| x.3.as_str());
        let higher = bv.or(nv).is_none_or(|x| x.2);
        let speedup = match (bv.and_then(|x| x.1), nv.and_then(|x| x.1)) {
            (Some(a), Some(c)) if a > 0.0 && c > 0.0 => {
                format!("{:.2}x", if higher { c / a } else { a / c })
            }
            _ => "—".to_string(),
        };
        let cpu_speedup = match (bv.and_then(|x| x.4), nv.and_then(|x| x.4)) {
            (Some(a), Some(c)) => format!("{:.2}x", if higher { c / a } else { a / c }),
            _ => "—".to_string(),
        };
        println!(
            "{name:<28} {:>10} {:>10} {unit:<10} {speedup:>8} {cpu_speedup:>12}",
            show(bv),
            show(nv)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn ratio_above_one_means_the_target_is_met_in_both_directions() {
        assert!(target_ratio(Unit::MRefsPerSec, 120.0, 100.0) > 1.0);
        assert!(target_ratio(Unit::Seconds, 8.0, 10.0) > 1.0);
        assert!(target_ratio(Unit::MiB, 12.0, 10.0) < 1.0);
    }

    fn figure(name: &str, value: Option<f64>, target: Option<f64>) -> Figure {
        Figure {
            row: crate::rows::find(name).unwrap(),
            target,
            detail: Value::Null,
            rounds: vec![(value, None)],
        }
    }

    fn rounds(name: &str, values: &[f64], cpu: &[Option<f64>]) -> Figure {
        Figure {
            rounds: values
                .iter()
                .map(|v| Some(*v))
                .zip(cpu.iter().copied())
                .collect(),
            ..figure(name, median(values), None)
        }
    }

    #[test]
    fn a_ratio_is_taken_round_by_round() {
        // The medians' ratio would be 4 / 4; each round's is 0.5, 1.0 or 0.3.
        let row = rounds("random-64m-native", &[1.0, 4.0, 9.0], &[Some(1.0); 3]);
        let floor = rounds(
            "random-64m-native-floor",
            &[2.0, 4.0, 30.0],
            &[Some(4.0), None, Some(2.0)],
        );
        let r = floor_ratios(&floor, &row).unwrap();
        assert_eq!(r.vmmu_over_floor, 0.5);
        assert_eq!(floor.per_cpu_s(), Some(3.0));
        // Per CPU second only the rounds where both have the figure: 0.25 and 0.5.
        assert_eq!(r.per_cpu_s, Some(0.375));
        let interval = rounds("random-64m-native-interval", &[0.5, 4.0, 2.7], &[None; 3]);
        let i = interval_ratios(&interval, &row).unwrap();
        assert_eq!((i.wall, i.per_cpu_s), (0.5, None));
    }

    #[test]
    fn a_floor_is_set_against_the_row_it_floors() {
        let row = figure("random-64m-native", Some(3.0), Some(15.0));
        let floor = figure("random-64m-native-floor", Some(12.0), None);
        let r = floor_ratios(&floor, &row).unwrap();
        assert_eq!((r.target_over_floor, r.vmmu_over_floor), (Some(1.25), 0.25));
        let doc = to_json(&[row, floor], json!({}));
        let f = &doc["figures"][1];
        assert_eq!(f["floor_of"], "random-64m-native");
        assert_eq!(f["target_over_floor"], 1.25);
        assert_eq!(doc["figures"][0].get("floor_of"), None);
        // A floor that failed, or a row not measured in this run: no ratios.
        let failed = figure("random-64m-native-floor", None, None);
        assert!(floor_ratios(&failed, &figure("random-64m-native", Some(3.0), None)).is_none());
        let alone = to_json(
            &[figure("random-64m-native-floor", Some(12.0), None)],
            json!({}),
        );
        assert_eq!(alone["figures"][0]["floor_of"], "random-64m-native");
        assert_eq!(alone["figures"][0].get("vmmu_over_floor"), None);
    }
}
