//! Nested virtualization (`mode = "nested-virt"`): the guest is an L2 guest of an L1
//! hypervisor, itself a VM of the L0 host. Three translations stack — L2 virtual → L2 physical
//! (the guest's tables), L2 physical → L1 physical (L1's EPT12), L1 physical → host physical
//! (L0's EPT01, the nested tables of [`crate::host::Host`], whose guest is L1) — and each L1
//! kind flattens them its own way, one implementation of the paging operations each:
//!
//! | file | `nested_virt.l1` | what the hardware walks |
//! |---|---|---|
//! | `ept.rs` | `ept` | L2's tables over EPT02, L0's shadow of EPT12 ∘ EPT01 (a 2D walk) |
//! | `shadow.rs` | `shadow` | L1's shadow tables (L2 virtual → L1 physical) over EPT01 (a 2D walk) |
//! | `three_d.rs` | `3d` | L2's tables over EPT12 over EPT01 (a 3D walk) |
//!
//! What `ept` and `3d` share is the L1 hypervisor (`l1.rs`): its memory, EPT12 and its
//! handler of an EPT violation, which backs one 4 KiB L2 page on first use (KVM maps guest memory on first
//! touch, `kvm_tdp_page_fault`), and L0's side of that handler: every frame L1
//! allocates it zeroes, and L0 backs each one — silently when it backs memory eagerly, by a
//! nested fault of L1 when lazily (`hypervisor.backing`). A shadow-paging L1 has no EPT12:
//! `l1.rs` gives it L1 memory with L1's own map of its guest's memory, and the same L0 side.

pub(super) mod ept;
pub(super) mod l1;
pub(super) mod shadow;
pub(super) mod three_d;
