//! The shadow pager's part in agile paging (Gandhi, Hill & Swift, ISCA 2016, §3): guest tables
//! moved to nested mode have no shadow page; the shadow entry above one is a switching entry
//! ([`Pte::SWITCH`]) holding the guest table's host address, where the hardware walk goes on in
//! 2D. Guest writes to tables in nested mode are not tracked (no write protection, no exit).
//! Which tables move, and when, is the hypervisor's policy (`vmm/agile.rs`).

use super::pages::SpKey;
use super::ShadowPager;
use crate::addr::{Gpa, Gva, Hpa, PageSize};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::mem::{PhysAddr, PhysMem};
use crate::paging::descent::{descend, Descent, Perms, Read};
use crate::paging::{PageTable, Pte};
use crate::walk::{SwitchStop, Switching};
use rustc_hash::FxHashMap;

/// The guest tables in nested mode and the switching entries that name them.
pub(super) struct Switched<A> {
    /// Guest tables (frame numbers) whose subtrees are in nested mode, with their levels.
    nested: FxHashMap<u64, u8>,
    /// The guest-physical frame of each guest table a switching entry names, by host frame.
    guest_of: FxHashMap<u64, Gpa>,
    /// The shadow entries (host addresses) made switching entries, by the guest table they
    /// name.
    parents: FxHashMap<u64, Vec<A>>,
}

impl<A> Default for Switched<A> {
    fn default() -> Self {
        Switched {
            nested: FxHashMap::default(),
            guest_of: FxHashMap::default(),
            parents: FxHashMap::default(),
        }
    }
}

impl<A> Switched<A> {
    /// Whether the guest table at frame `gfn` is in nested mode.
    #[inline]
    pub(super) fn is_nested(&self, gfn: u64) -> bool {
        !self.nested.is_empty() && self.nested.contains_key(&gfn)
    }
}

impl<A: PhysAddr> ShadowPager<A> {
    /// Makes the entry for `va` at `level` of shadow page `spage` a switching entry naming the
    /// guest table the guest entry of that level points to (`path`, the guest walk's), with
    /// the rights of the guest path down to it. A guest table the host has not backed yet is
    /// backed here (`lazy`); returns the frames backed.
    pub(super) fn link_switch(
        &mut self,
        host: &mut Host<A>,
        spage: A,
        va: Gva,
        level: u8,
        path: &[(Gpa, Pte); 6],
        lazy: bool,
    ) -> Result<u32> {
        let geo = self.geo;
        let mask = geo.frame_mask();
        let table = Gpa::new(path[level as usize].1.frame(mask));
        let mut backed = 0;
        let hpa = match host.translate(table) {
            Some((h, _)) => h,
            None if lazy => {
                host.back(table, PageSize::Size4K)?;
                self.stats.backed += 1;
                backed = 1;
                host.translate(table).expect("just backed").0
            }
            None => {
                return Err(Error::Check {
                    event: 0,
                    detail: format!(
                        "guest table {table} has no host frame although guest memory is \
                         backed eagerly"
                    ),
                })
            }
        };
        let mut perms = Perms::ALL;
        for l in level..=geo.levels {
            if geo.restricts(l) {
                perms.narrow(path[l as usize].1);
            }
        }
        let mut flags = Pte::P | Pte::A | Pte::SWITCH;
        if perms.writable {
            flags |= Pte::RW;
        }
        if perms.user {
            flags |= Pte::US;
        }
        if !perms.exec && geo.entry_bytes == 8 {
            flags |= Pte::NX;
        }
        let ea = spage.add(geo.entry_offset(va.raw(), level));
        let cur = geo.read_entry(&host.hmem, ea);
        let want = Pte((hpa.raw() & mask) | flags);
        if cur != want {
            if cur.present() && cur.0 & Pte::SWITCH == 0 && geo.leaf_at(level, cur).is_none() {
                self.drop_entry(host, ea, level);
            }
            geo.write_entry(&mut host.hmem, ea, want);
            let sw = &mut self.agile;
            sw.guest_of.insert(hpa.raw() & mask, table);
            let parents = sw.parents.entry(table.raw() >> 12).or_default();
            if !parents.contains(&ea) {
                parents.push(ea);
            }
        }
        self.stats.fills += 1;
        Ok(backed)
    }
}

impl ShadowPager<Hpa> {
    /// The highest level the guest table at frame `gfn` is shadowed at, if it is.
    pub fn shadow_level(&self, gfn: u64) -> Option<u8> {
        let levels = self.gfns.get(&gfn)?.levels;
        (levels != 0).then(|| 7 - levels.leading_zeros() as u8)
    }

    /// Moves the guest table at frame `gfn`, of `level`, and the tables below it to nested
    /// mode: their shadow pages go (the shadow entries above refill as switching entries on
    /// the next hidden fault). Returns the shadow pages removed.
    pub fn nest(&mut self, host: &mut Host, gfn: u64, level: u8) -> u64 {
        self.agile.nested.insert(gfn, level);
        let mut removed = 0;
        let mut todo: Vec<SpKey> = (1..=self.geo.levels)
            .map(|level| SpKey {
                gfn,
                level,
                direct: false,
            })
            .collect();
        while let Some(key) = todo.pop() {
            let Some(hpa) = self.pages.get(&key).map(|p| p.hpa) else {
                continue;
            };
            if key.level > 1 {
                for i in 0..self.geo.entries(key.level) {
                    let e = self
                        .geo
                        .read_entry(&host.hmem, hpa.add(i * self.geo.entry_bytes as u64));
                    if !e.present()
                        || e.0 & Pte::SWITCH != 0
                        || self.geo.leaf_at(key.level, e).is_some()
                    {
                        continue;
                    }
                    if let Some(&child) = self.by_hpa.get(&e.frame(self.geo.frame_mask())) {
                        if !child.direct {
                            todo.push(child);
                        }
                    }
                }
            }
            self.zap(host, key);
            removed += 1;
        }
        removed
    }

    /// The guest tables (frame numbers) of the subtree in nested mode rooted at `gfn`, as the
    /// guest's tables in `gmem` are now: the hypervisor's walk of the subtree when it scans
    /// the nested dirty bits of its pages. `gfn` first.
    pub fn subtree(&self, gmem: &PhysMem<Gpa>, gfn: u64) -> Vec<u64> {
        let geo = self.geo;
        let Some(&level) = self.agile.nested.get(&gfn) else {
            return Vec::new();
        };
        let mut out = vec![gfn];
        let mut todo = vec![(gfn, level)];
        while let Some((t, l)) = todo.pop() {
            if l <= 1 {
                continue;
            }
            for i in 0..geo.entries(l) {
                let e = geo.read_entry(gmem, Gpa::new((t << 12) + i * geo.entry_bytes as u64));
                if e.present() && geo.leaf_at(l, e).is_none() {
                    let child = e.frame(geo.frame_mask()) >> 12;
                    out.push(child);
                    todo.push((child, l - 1));
                }
            }
        }
        out
    }

    /// Moves the guest table at frame `gfn` back to shadow mode: the switching entries that
    /// name it are cleared, so the shadow path below refills through hidden faults.
    pub fn unnest(&mut self, host: &mut Host, gfn: u64) {
        let sw = &mut self.agile;
        sw.nested.remove(&gfn);
        let geo = self.geo;
        let mask = geo.frame_mask();
        for ea in sw.parents.remove(&gfn).unwrap_or_default() {
            // Only an entry of a live shadow page that still names this table.
            if !self.by_hpa.contains_key(&(ea.raw() & !0xfff)) {
                continue;
            }
            let e = geo.read_entry(&host.hmem, ea);
            let names = e.present()
                && e.0 & Pte::SWITCH != 0
                && sw.guest_of.get(&e.frame(mask)) == Some(&Gpa::new(gfn << 12));
            if names {
                geo.write_entry(&mut host.hmem, ea, Pte(0));
                self.unlinked = true;
            }
        }
    }

    /// The guest tables in nested mode, in frame order.
    pub fn nested_tables(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.agile.nested.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Whether the guest table at frame `gfn` is in nested mode.
    pub fn is_nested(&self, gfn: u64) -> bool {
        self.agile.is_nested(gfn)
    }

    /// The guest-physical frame of each guest table a switching entry names, by host frame
    /// (what the agile walk reads the guest tables by).
    pub fn guest_of(&self) -> &FxHashMap<u64, Gpa> {
        &self.agile.guest_of
    }

    /// Whether the loaded shadow tables reach a switching entry on the way to `va` (so a
    /// fault there is in the nested part of the walk: the guest's own).
    pub fn switches_at(&self, host: &Host, va: Gva) -> bool {
        let Some(spt): Option<PageTable<Gva, Hpa>> = self.tables() else {
            return false;
        };
        let mut read = Read {
            mem: &host.hmem,
            geo: self.geo,
        };
        matches!(
            descend(
                &self.geo,
                &mut Switching(&mut read),
                spt.root,
                self.geo.levels,
                va
            ),
            Descent::Stopped(SwitchStop::At { .. })
        )
    }
}
