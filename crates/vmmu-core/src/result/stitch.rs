//! Results as JSON trees that can be subtracted and added: a running simulation's result at
//! a window boundary (made of its counters copied there), the change over a window (every integer field; the union
//! of the keys), and sums of such changes. The oracle stitches its result from the windows of
//! two simulations this way, so every field of `RunResult` takes part without a list to keep
//! up to date. Ratios (`cpi`, `walk_refs_per_walk`, `sim.*`) are recomputed by the caller;
//! strings and flags are taken from the later tree.

use super::counts::Counts;
use super::RunResult;
use crate::config::SimConfig;
use crate::sim::Simulator;
use serde_json::{Map, Value};
use std::sync::Arc;

/// The result of `sim` at the moment of `counts` (one of its copies) as a JSON tree, without
/// its configuration and timeline; `config` is `sim`'s, shared.
pub(super) fn tree(sim: &Simulator, counts: &Counts, config: &Arc<SimConfig>) -> Value {
    let (result, steps) = RunResult::of_counts(sim, counts, "", 0.0, Arc::clone(config));
    let mut v = result.to_json();
    if let Value::Object(m) = &mut v {
        m.remove("config");
        m.remove("timeline");
        let maps = [
            ("walk_refs_by_step", steps.walk_refs_by_step()),
            ("pwc_hits_by_step", steps.pwc_hits_by_step()),
        ];
        for (key, map) in maps {
            m.insert(
                key.to_string(),
                Value::from(Map::from_iter(
                    map.into_iter().map(|(k, n)| (k, Value::from(n))),
                )),
            );
        }
    }
    v
}

/// `b − a`: integers subtracted (as signed numbers), objects key by key over the union of
/// their keys (a key missing on one side counts as zero), anything else taken from `b`.
pub(super) fn delta(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut out = Map::new();
            for (k, vb) in y {
                let d = match x.get(k) {
                    Some(va) => delta(va, vb),
                    None => delta(&zero_like(vb), vb),
                };
                out.insert(k.clone(), d);
            }
            for (k, va) in x {
                if !y.contains_key(k) {
                    out.insert(k.clone(), delta(va, &zero_like(va)));
                }
            }
            Value::Object(out)
        }
        (Value::Number(x), Value::Number(y)) if is_int(x) && is_int(y) => {
            Value::from(int(y) - int(x))
        }
        (_, other) => other.clone(),
    }
}

/// `acc += d`, with the rules of [`delta`].
pub(super) fn add(acc: &mut Value, d: &Value) {
    if let (Value::Object(x), Value::Object(y)) = (&mut *acc, d) {
        for (k, vd) in y {
            match x.get_mut(k) {
                Some(va) => add(va, vd),
                None => {
                    x.insert(k.clone(), vd.clone());
                }
            }
        }
        return;
    }
    if let (Some(a), Value::Number(y)) = (acc.as_i64(), d) {
        if is_int(y) {
            *acc = Value::from(a + int(y));
            return;
        }
    }
    *acc = d.clone();
}

/// Renames the keys of object `v` at `key` with `rename`.
pub(super) fn rename_keys(v: &mut Value, key: &str, rename: impl Fn(&str) -> String) {
    if let Some(Value::Object(m)) = v.get_mut(key) {
        let old = std::mem::take(m);
        for (k, x) in old {
            m.insert(rename(&k), x);
        }
    }
}

fn is_int(n: &serde_json::Number) -> bool {
    n.is_i64() || n.is_u64()
}

fn int(n: &serde_json::Number) -> i64 {
    n.as_i64()
        .or_else(|| n.as_u64().map(|u| u as i64))
        .unwrap_or(0)
}

/// A tree shaped like `v` with every integer zero.
fn zero_like(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, x)| (k.clone(), zero_like(x))).collect())
        }
        Value::Number(n) if is_int(n) => Value::from(0),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changes_cover_the_union_of_keys_and_sum_back() {
        let a = json!({"cycles": 10, "exits": {"pt_write": {"count": 2, "world_switch": true}}});
        let b = json!({"cycles": 25, "exits": {"pt_write": {"count": 5, "world_switch": true},
                        "invlpg": {"count": 1, "world_switch": true}}, "mode": "shadow"});
        let d = delta(&a, &b);
        assert_eq!(
            d,
            json!({"cycles": 15, "exits": {"pt_write": {"count": 3, "world_switch": true},
                   "invlpg": {"count": 1, "world_switch": true}}, "mode": "shadow"})
        );
        let mut acc = a.clone();
        add(&mut acc, &d);
        assert_eq!(acc, b);
    }

    #[test]
    fn a_level_that_falls_gives_a_negative_change() {
        assert_eq!(
            delta(&json!({"live": 7}), &json!({"live": 3})),
            json!({"live": -4})
        );
    }
}
