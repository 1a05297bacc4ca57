//! Bringing shadow pages back in step with the guest's tables: the resync of an out-of-sync
//! leaf table (KVM `kvm_sync_page`), and the full revalidation of a shadow cache that was kept
//! while the VM ran under nested paging (no guest write was tracked meanwhile, so every kept
//! page may be stale).

use super::pages::SpKey;
use super::ShadowPager;
use crate::addr::Gpa;
use crate::host::Host;
use crate::mem::{PhysAddr, PhysMem};
use crate::paging::Pte;

impl<A: PhysAddr> ShadowPager<A> {
    /// Resyncs every out-of-sync page; returns how many.
    pub fn resync_all(&mut self, gmem: &PhysMem<Gpa>, host: &mut Host<A>) -> u32 {
        let pages = std::mem::take(&mut self.oos);
        for &gfn in &pages {
            self.resync(gmem, host, gfn);
        }
        pages.len() as u32
    }

    /// Resyncs one out-of-sync leaf table: shadow entries that no longer match the guest's are
    /// dropped (they refill on use), and the table is write-protected again.
    pub(super) fn resync(&mut self, gmem: &PhysMem<Gpa>, host: &mut Host<A>, gfn: u64) {
        self.stats.resyncs += 1;
        if let Some(g) = self.gfns.get_mut(&gfn) {
            g.oos = false;
        }
        let key = SpKey {
            gfn,
            level: 1,
            direct: false,
        };
        if let Some(p) = self.pages.get(&key) {
            let hpa = p.hpa;
            self.check_entries(gmem, host, gfn, 1, hpa);
        }
    }

    /// Revalidates every shadow page against the guest's tables as they are now (a kept shadow
    /// cache coming back into use): each entry that no longer shadows its guest entry exactly
    /// is dropped, and nothing stays out of sync. Returns the pages revalidated.
    pub fn revalidate_all(&mut self, gmem: &PhysMem<Gpa>, host: &mut Host<A>) -> u64 {
        let keys: Vec<SpKey> = self.pages.keys().copied().filter(|k| !k.direct).collect();
        let mut n = 0;
        for k in keys {
            // A page may have gone with an orphaned direct child of an earlier one.
            let Some(hpa) = self.pages.get(&k).map(|p| p.hpa) else {
                continue;
            };
            self.check_entries(gmem, host, k.gfn, k.level, hpa);
            n += 1;
        }
        for g in self.gfns.values_mut() {
            g.oos = false;
            g.flood = 0;
        }
        self.oos.clear();
        self.stats.revalidated += n;
        n
    }

    /// Drops every entry of the shadow page at `spage` (level `level`, shadowing the guest
    /// table at frame `gfn`) that does not match the guest entry it shadows.
    fn check_entries(
        &mut self,
        gmem: &PhysMem<Gpa>,
        host: &mut Host<A>,
        gfn: u64,
        level: u8,
        spage: A,
    ) {
        let geo = self.geo;
        for i in 0..geo.entries(level) {
            let sea = spage.add(i * geo.entry_bytes as u64);
            let s = geo.read_entry(&host.hmem, sea);
            if !s.present() {
                continue;
            }
            let g = geo.read_entry(gmem, Gpa::new((gfn << 12) + i * geo.entry_bytes as u64));
            if !self.still_shadows(host, level, s, g) {
                self.drop_entry(host, sea, level);
            }
        }
    }

    /// Whether shadow entry `s` of `level` still shadows guest entry `g`.
    fn still_shadows(&self, host: &Host<A>, level: u8, s: Pte, g: Pte) -> bool {
        let geo = self.geo;
        let mask = geo.frame_mask();
        if !g.present() {
            return false;
        }
        match (geo.leaf_at(level, s), geo.leaf_at(level, g)) {
            // A leaf: the same host frame, and no right the guest no longer grants.
            (Some(size), Some(gsize)) => {
                size == gsize
                    && host
                        .translate(Gpa::new(g.frame(mask) & !gsize.offset_mask()))
                        .is_some_and(|(h, _)| h.raw() & mask == s.frame(mask))
                    && (g.writable() || !s.writable())
                    && (g.executable() || !s.executable())
                    && (g.user() || !s.user())
            }
            // A table: the shadow page of the guest table the entry points to now, reached
            // through a guest entry that restricts nothing (shadow upper entries never do).
            (None, None) => {
                let child = self.by_hpa.get(&s.frame(mask));
                let permissive =
                    !geo.restricts(level) || (g.writable() && g.user() && g.executable());
                permissive && child.is_some_and(|k| !k.direct && k.gfn == g.frame(mask) >> 12)
            }
            // A splinter table under a guest large page: rebuilt on use rather than compared.
            (None, Some(_)) | (Some(_), None) => false,
        }
    }
}
