//! Loading configuration: the shipped machine presets and cost profiles (by name or from a
//! `.toml` file), whole configs from TOML, and `--set dotted.path=value` overrides, with errors
//! that name the dotted path of the field.

use super::*;
use crate::error::{Error, Result};
use serde::Deserialize;

/// The machine presets shipped with vmmu, as `(name, TOML text)`.
pub const PRESETS: &[(&str, &str)] = &[
    (
        "bhargava08",
        include_str!("../../presets/machines/bhargava08.toml"),
    ),
    (
        "opteron2350",
        include_str!("../../presets/machines/opteron2350.toml"),
    ),
    (
        "core2-e6300",
        include_str!("../../presets/machines/core2-e6300.toml"),
    ),
    (
        "nehalem-x5560",
        include_str!("../../presets/machines/nehalem-x5560.toml"),
    ),
    (
        "cascadelake",
        include_str!("../../presets/machines/cascadelake.toml"),
    ),
    (
        "golden-cove",
        include_str!("../../presets/machines/golden-cove.toml"),
    ),
    ("zen3", include_str!("../../presets/machines/zen3.toml")),
    ("zen4", include_str!("../../presets/machines/zen4.toml")),
];

/// Loads a machine by preset name, or from a TOML file when `name_or_path` ends in `.toml`.
pub fn load_machine(name_or_path: &str) -> Result<MachineConfig> {
    load_named(name_or_path, PRESETS, "machine", "machine", "preset")
}

/// Loads `name_or_path` from the shipped `table` (by name) or from a `.toml` file, and
/// deserializes it with errors naming `prefix.field`; an unknown name lists the known ones.
fn load_named<T: for<'de> Deserialize<'de>>(
    name_or_path: &str,
    table: &[(&str, &str)],
    field: &str,
    prefix: &str,
    what: &str,
) -> Result<T> {
    let text = if name_or_path.ends_with(".toml") {
        std::fs::read_to_string(name_or_path).map_err(|e| Error::io(name_or_path, e))?
    } else {
        table
            .iter()
            .find(|(n, _)| *n == name_or_path)
            .map(|(_, t)| t.to_string())
            .ok_or_else(|| {
                let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
                Error::config(
                    field,
                    format!(
                        "unknown {what} `{name_or_path}` ({}{what}s: {}; or a path ending in .toml)",
                        crate::error::did_you_mean(name_or_path, names.iter().copied()),
                        names.join(", ")
                    ),
                )
            })?
    };
    let value: toml::Value =
        toml::from_str(&text).map_err(|e| Error::config(prefix, format!("{name_or_path}: {e}")))?;
    deserialize_at(value, prefix)
}

fn deserialize_at<T: for<'de> Deserialize<'de>>(value: toml::Value, prefix: &str) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." || path.is_empty() {
            prefix.to_string()
        } else if prefix.is_empty() {
            path
        } else {
            format!("{prefix}.{path}")
        };
        Error::config(field, e.into_inner().to_string())
    })
}

/// Parses a `--set` value: a TOML literal (`4`, `true`, `"2M"`, `[1,2]`), else a bare string.
fn parse_override_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

/// Splits `a.b[0].c` or `a.b.0.c` into segments.
fn split_path(path: &str) -> Vec<String> {
    path.replace('[', ".")
        .replace(']', "")
        .split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn set_path(root: &mut toml::Value, path: &str, value: toml::Value) -> Result<()> {
    let segs = split_path(path);
    if segs.is_empty() {
        return Err(Error::config(path, "empty --set path"));
    }
    let mut cur = root;
    let mut walked = String::new();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let here = if walked.is_empty() {
            seg.clone()
        } else {
            format!("{walked}.{seg}")
        };
        let next = match cur {
            toml::Value::Table(t) => {
                // Optional sections may be absent in a preset; an unknown key is still an error.
                if !t.contains_key(seg.as_str()) {
                    let known: Vec<&String> = t.keys().collect();
                    return Err(Error::config(
                        here,
                        format!(
                            "unknown configuration field (known here: {})",
                            known
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
                t.get_mut(seg.as_str()).expect("checked above")
            }
            toml::Value::Array(a) => {
                let idx: usize = seg
                    .parse()
                    .map_err(|_| Error::config(here.clone(), "expected an array index here"))?;
                let n = a.len();
                a.get_mut(idx).ok_or_else(|| {
                    Error::config(here.clone(), format!("index out of range (length {n})"))
                })?
            }
            _ => {
                return Err(Error::config(
                    walked.clone(),
                    format!("is a value, not a table; cannot set `{seg}` inside it"),
                ))
            }
        };
        if last {
            *next = value;
            return Ok(());
        }
        cur = next;
        walked = here;
    }
    unreachable!("loop returns on the last segment")
}

/// The exit cost profiles shipped with vmmu, as `(name, TOML text)`.
pub const PROFILES: &[(&str, &str)] = &[
    (
        "kvm-modern",
        include_str!("../../presets/profiles/kvm-modern.toml"),
    ),
    (
        "xen-3.0.4-core2",
        include_str!("../../presets/profiles/xen-3.0.4-core2.toml"),
    ),
    (
        "palacios-opteron2350",
        include_str!("../../presets/profiles/palacios-opteron2350.toml"),
    ),
    (
        "esx-nehalem",
        include_str!("../../presets/profiles/esx-nehalem.toml"),
    ),
];

/// Loads a cost profile by name, or from a TOML file when the name ends in `.toml`.
pub fn load_profile(name_or_path: &str) -> Result<CostProfile> {
    load_named(
        name_or_path,
        PROFILES,
        "hypervisor.profile",
        "hypervisor.costs",
        "profile",
    )
}

impl SimConfig {
    /// Parses a whole config from TOML text, then applies `--set` overrides (`path`, `value`),
    /// then validates.
    pub fn from_toml_with_overrides(text: &str, overrides: &[(String, String)]) -> Result<Self> {
        let value: toml::Value =
            toml::from_str(text).map_err(|e| Error::config("config", e.to_string()))?;
        let cfg: SimConfig = deserialize_at(value, "")?;
        cfg.with_overrides(overrides)
    }

    /// Applies `--set` overrides to this config (all defaults expanded first), then validates.
    ///
    /// The policy section is optional, so it is prepared first: a `policy.kind` override
    /// loads that policy's defaults (later `policy.KEY` overrides then apply to it, as
    /// `hypervisor.profile` loads a profile's numbers), and an adaptive run, or any
    /// `policy.KEY` override, without a policy gets DAV²M's. The optional sizing section is
    /// created empty for `sizing` overrides to fill (validation then needs its sizes), and so
    /// are the phase markers `warmup.phase` and `stop.phase`, left out of the written config
    /// while unset; the optional `nested_virt` section is created with its defaults for a
    /// nested-virt run or any `nested_virt.KEY` override, and the `agile` section for any
    /// `agile.KEY` override.
    pub fn with_overrides(&self, overrides: &[(String, String)]) -> Result<Self> {
        let mut base = self.clone();
        base.prepare_policy(overrides)?;
        let touches = |path: &str| overrides.iter().any(|(p, _)| p == path);
        if touches("warmup.phase") {
            base.warmup.phase.get_or_insert(0);
        }
        if touches("stop.phase") {
            base.stop.phase.get_or_insert(0);
        }
        if base.sizing.is_none()
            && overrides
                .iter()
                .any(|(p, _)| p == "sizing" || p.starts_with("sizing.") || p.starts_with("sizing["))
        {
            base.sizing = Some(SizingConfig {
                array: 0,
                sizes: Vec::new(),
            });
        }
        let nested_virt = overrides.iter().any(|(p, v)| {
            p.starts_with("nested_virt.")
                || (p == "mode" && v.trim().trim_matches('"') == Mode::NestedVirt.name())
        });
        if base.nested_virt.is_none() && nested_virt {
            base.nested_virt = Some(NestedVirtConfig::default());
        }
        if base.agile.is_none() && overrides.iter().any(|(p, _)| p.starts_with("agile.")) {
            base.agile = Some(AgileConfig::default());
        }
        let mut full = toml::Value::try_from(&base)
            .map_err(|e| Error::config("config", format!("cannot expand defaults: {e}")))?;
        for (path, raw) in overrides {
            set_path(&mut full, path, parse_override_value(raw))?;
        }
        let mut cfg: SimConfig = deserialize_at(full, "")?;
        if cfg.mode == Mode::Adaptive && cfg.policy.is_none() {
            cfg.policy = PolicyConfig::default_of("dav2m");
        }
        if cfg.mode == Mode::NestedVirt && cfg.nested_virt.is_none() {
            cfg.nested_virt = Some(NestedVirtConfig::default());
        }
        if let Some(nv) = cfg.nested_virt.as_mut() {
            nv.settle()?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Gives the config the policy section `overrides` need (see [`Self::with_overrides`]).
    fn prepare_policy(&mut self, overrides: &[(String, String)]) -> Result<()> {
        let unquote = |v: &str| v.trim().trim_matches('"').to_string();
        if let Some((_, raw)) = overrides.iter().rev().find(|(p, _)| p == "policy.kind") {
            let kind = unquote(raw);
            let fresh = PolicyConfig::default_of(&kind).ok_or_else(|| {
                Error::config(
                    "policy.kind",
                    format!(
                        "unknown policy `{kind}` ({}policies: {})",
                        crate::error::did_you_mean(&kind, POLICY_KINDS.iter().copied()),
                        POLICY_KINDS.join(", ")
                    ),
                )
            })?;
            if self.policy.as_ref().map(PolicyConfig::kind) != Some(kind.as_str()) {
                self.policy = Some(fresh);
            }
            return Ok(());
        }
        let adaptive = overrides
            .iter()
            .rev()
            .find(|(p, _)| p == "mode")
            .is_some_and(|(_, v)| unquote(v) == Mode::Adaptive.name());
        let touches = overrides.iter().any(|(p, _)| p.starts_with("policy."));
        if self.policy.is_none() && (adaptive || touches) {
            self.policy = PolicyConfig::default_of("dav2m");
        }
        Ok(())
    }

    /// The config as TOML text (every default written out).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}

/// Builds a validated config from a machine preset name (or `.toml` path) and `--set`
/// overrides (`dotted.path`, `value`), in order.
///
/// A `hypervisor.profile` override loads that profile's numbers into `hypervisor.costs` before
/// the other overrides apply, so `--profile X --set hypervisor.costs.hypercall=900` works.
pub fn build(machine: &str, overrides: &[(String, String)]) -> Result<SimConfig> {
    let mut cfg = SimConfig::new(load_machine(machine)?);
    if let Some((_, name)) = overrides
        .iter()
        .rev()
        .find(|(p, _)| p == "hypervisor.profile")
    {
        let name = name.trim_matches('"');
        cfg.hypervisor.costs = load_profile(name)?;
        cfg.hypervisor.profile = name.to_string();
    }
    cfg.with_overrides(overrides)
}
