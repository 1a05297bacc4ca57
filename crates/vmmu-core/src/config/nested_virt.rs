//! Nested virtualization (`mode = "nested-virt"`): an L2 guest on an L1 hypervisor on the L0
//! host, and how the hardware and the two hypervisors flatten its three translations
//! (docs/model.md, "Nested virtualization").

use super::Bytes;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How L2-physical memory reaches host memory: the L1 hypervisor's kind and the hardware
/// walk that results.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub enum L1Kind {
    /// EPT on EPT (KVM nVMX; Turtles' multi-dimensional paging, Ben-Yehuda et al., OSDI 2010
    /// §3.3): L1 keeps EPT12 for its guest, L0 composes it with EPT01 into a shadow EPT02
    /// built lazily on EPT violations and kept coherent by write-protecting EPT12; the
    /// hardware walks L2's tables over EPT02 in 2D.
    #[default]
    #[serde(rename = "ept")]
    Ept,
    /// Shadow on EPT: L1 shadow-pages its guest (shadow tables mapping L2 virtual to L1
    /// physical, kept coherent by write-protecting L2's tables); L0 keeps EPT01, and the
    /// hardware walks the shadow tables over EPT01 in 2D.
    #[serde(rename = "shadow")]
    Shadow,
    /// PVM (Huang et al., SOSP 2023): L2 runs at user privilege inside L1, whose hypervisor
    /// (a KVM vendor module with a switcher in the L1 kernel's entry code) shadow-pages it
    /// directly onto L1 physical memory, two shadow tables per guest table (user and kernel
    /// sides, each with its PCIDs); world switches go through the switcher, not L0.
    #[serde(rename = "pvm")]
    Pvm,
    /// A 3D hardware walk (no x86 part implements it): L2's tables over EPT12 over EPT01,
    /// (n+1)^3 - 1 references at n levels.
    #[serde(rename = "3d")]
    ThreeD,
}

impl L1Kind {
    /// Every kind, as configs name them.
    pub const NAMES: [&'static str; 4] = ["ept", "shadow", "pvm", "3d"];

    /// The name used in configs and results.
    pub const fn name(self) -> &'static str {
        match self {
            L1Kind::Ept => "ept",
            L1Kind::Shadow => "shadow",
            L1Kind::Pvm => "pvm",
            L1Kind::ThreeD => "3d",
        }
    }
}

/// The costs of nested virtualization beyond the run's cost profile, in cycles
/// (`presets/nested/*.toml`, each value sourced).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L1Costs {
    /// Profile name.
    pub name: String,
    /// One line on what the profile describes.
    #[serde(default)]
    pub description: String,
    /// An L2 exit L1 handles: L2 -> L0 -> L1 and L1's VMRESUME -> L0 -> L2, with L0's
    /// emulation of the VM exit and entry, before L1's handler.
    pub nested_round_trip: u64,
    /// L1's handler of its guest's EPT violation (faulting in an L1 page, installing the
    /// EPT12 entry), without the exits it causes.
    pub l1_fault: u64,
    /// PVM: a world switch L2 → L1 → L2 through the switcher, without L0; 0 in a profile
    /// that does not describe PVM (a pvm run then uses the `pvm` profile).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub switcher_round_trip: u64,
    /// Where each value comes from.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The nested-cost profiles shipped with vmmu.
pub const L1_PROFILES: &[(&str, &str)] = &[
    (
        "kvm-nvmx",
        include_str!("../../presets/nested/kvm-nvmx.toml"),
    ),
    ("pvm", include_str!("../../presets/nested/pvm.toml")),
];

impl L1Costs {
    /// The shipped profile `name`.
    pub fn load(name: &str) -> Result<L1Costs> {
        let (_, text) = L1_PROFILES
            .iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| {
                Error::config(
                    "nested_virt.costs",
                    format!(
                        "unknown nested-cost profile `{name}` (profiles: {})",
                        L1_PROFILES
                            .iter()
                            .map(|(n, _)| *n)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
        toml::from_str(text).map_err(|e| Error::config("nested_virt.costs", e.to_string()))
    }
}

fn default_costs() -> L1Costs {
    L1Costs::load("kvm-nvmx").expect("the shipped nested-cost profile parses")
}

/// The L1 hypervisor of a nested-virtualization run (`[nested_virt]`, only with
/// `mode = "nested-virt"`).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NestedVirtConfig {
    /// The L1 hypervisor's kind and the walk that results.
    #[serde(default)]
    pub l1: L1Kind,
    /// L1's physical memory, which holds L2's memory and EPT12; 0: twice `guest.memory`
    /// (assumption: an L1 VM sized for one L2 guest and its own kernel).
    #[serde(default)]
    pub l1_memory: Bytes,
    /// The costs beyond the run's cost profile.
    #[serde(default = "default_costs")]
    pub costs: L1Costs,
}

impl Default for NestedVirtConfig {
    fn default() -> Self {
        NestedVirtConfig {
            l1: L1Kind::default(),
            l1_memory: Bytes(0),
            costs: default_costs(),
        }
    }
}

impl NestedVirtConfig {
    /// Gives a pvm run whose profile has no switcher cost the `pvm` profile (the default
    /// profile, `kvm-nvmx`, describes KVM on KVM).
    pub fn settle(&mut self) -> Result<()> {
        if self.l1 == L1Kind::Pvm && self.costs.switcher_round_trip == 0 {
            self.costs = L1Costs::load("pvm")?;
        }
        Ok(())
    }

    /// L1's physical memory for an L2 guest of `guest_memory` bytes.
    pub fn l1_bytes(&self, guest_memory: u64) -> u64 {
        if self.l1_memory.0 == 0 {
            guest_memory.saturating_mul(2)
        } else {
            self.l1_memory.0
        }
    }
}
