//! The shadow page cache's bookkeeping: shadow pages keyed by the guest table they shadow,
//! their parent entries (back-pointers, as KVM's parent-pte lists, so removing a page never
//! searches), building, linking and removing them.

use super::ShadowPager;
use crate::addr::Gva;
use crate::error::Result;
use crate::host::Host;
use crate::mem::PhysAddr;
use crate::paging::Pte;

/// Identity of a shadow page.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct SpKey {
    /// The guest table's frame number, or for a direct page the guest-physical frame number
    /// of the region it maps.
    pub gfn: u64,
    /// The level of the shadow table.
    pub level: u8,
    /// A splinter table shadowing no guest table.
    pub direct: bool,
}

/// One shadow page.
#[derive(Clone, Debug)]
pub(super) struct ShadowPage<A> {
    /// Its frame in host memory.
    pub hpa: A,
    /// Shadow entries (host addresses) that point to this page.
    pub parents: Vec<A>,
}

impl<A: PhysAddr> ShadowPager<A> {
    /// The shadow page of `key`, built (a zeroed host frame) if it does not exist.
    pub(super) fn get_or_make(
        &mut self,
        host: &mut Host<A>,
        key: SpKey,
        built: &mut u32,
    ) -> Result<A> {
        if let Some(p) = self.pages.get(&key) {
            return Ok(p.hpa);
        }
        let hpa = host.alloc_table_frame()?;
        self.pages.insert(
            key,
            ShadowPage {
                hpa,
                parents: Vec::new(),
            },
        );
        self.by_hpa.insert(hpa.raw(), key);
        if !key.direct {
            let g = self.gfns.entry(key.gfn).or_default();
            g.shadows += 1;
            g.levels |= 1 << key.level;
        }
        self.stats.pages_built += 1;
        *built += 1;
        Ok(hpa)
    }

    /// Removes a shadow page: unlinks it from its parents and its children, frees its frame.
    pub(super) fn zap(&mut self, host: &mut Host<A>, key: SpKey) {
        let Some(page) = self.pages.remove(&key) else {
            return;
        };
        self.unlinked = true;
        self.by_hpa.remove(&page.hpa.raw());
        for &parent in &page.parents {
            self.geo.write_entry(&mut host.hmem, parent, Pte(0));
        }
        if key.level > 1 {
            for i in 0..self.geo.entries(key.level) {
                let ea = page.hpa.add(i * self.geo.entry_bytes as u64);
                let e = self.geo.read_entry(&host.hmem, ea);
                if e.present() && self.geo.leaf_at(key.level, e).is_none() {
                    self.forget_parent(host, e, ea);
                }
            }
        }
        if !key.direct {
            if let Some(g) = self.gfns.get_mut(&key.gfn) {
                g.shadows -= 1;
                g.levels &= !(1 << key.level);
                if g.shadows == 0 {
                    self.gfns.remove(&key.gfn);
                    self.oos.retain(|&x| x != key.gfn);
                }
            }
        }
        self.roots.retain(|&(_, h)| h != page.hpa);
        if self.current.map(|(_, h)| h) == Some(page.hpa) {
            self.current = None;
        }
        host.free_table_frame(page.hpa);
        self.stats.pages_removed += 1;
    }

    /// The child shadow page that the non-leaf entry `e` points to no longer has `parent` as a
    /// parent entry. A direct (splinter) page left with no parent goes: it shadows no guest
    /// table, so nothing would keep its entries in step with the guest's large page.
    fn forget_parent(&mut self, host: &mut Host<A>, e: Pte, parent: A) {
        let child = e.frame(self.geo.frame_mask());
        let Some(ck) = self.by_hpa.get(&child).copied() else {
            return;
        };
        let orphan = self.pages.get_mut(&ck).is_some_and(|cp| {
            cp.parents.retain(|&p| p != parent);
            cp.parents.is_empty()
        });
        if orphan && ck.direct {
            self.zap(host, ck);
        }
    }

    /// Points the entry for `va` at `level` of shadow page `spage` to `child`; returns `child`.
    pub(super) fn link(
        &mut self,
        host: &mut Host<A>,
        spage: A,
        va: Gva,
        level: u8,
        child: A,
        key: SpKey,
    ) -> A {
        let geo = self.geo;
        let ea = spage.add(geo.entry_offset(va.raw(), level));
        let cur = geo.read_entry(&host.hmem, ea);
        let accessed = if geo.restricts(level) { Pte::A } else { 0 };
        let want = Pte(child.raw() | geo.table_entry_flags(level) | accessed);
        if cur != want {
            if cur.present() && geo.leaf_at(level, cur).is_none() {
                self.forget_parent(host, cur, ea);
                self.unlinked = true;
            }
            geo.write_entry(&mut host.hmem, ea, want);
            if let Some(p) = self.pages.get_mut(&key) {
                if !p.parents.contains(&ea) {
                    p.parents.push(ea);
                }
            }
        }
        child
    }

    /// Clears one shadow entry of `level`, unlinking a child shadow page it pointed to.
    pub(super) fn drop_entry(&mut self, host: &mut Host<A>, ea: A, level: u8) {
        let e = self.geo.read_entry(&host.hmem, ea);
        if !e.present() {
            return;
        }
        if self.geo.leaf_at(level, e).is_none() {
            self.forget_parent(host, e, ea);
            self.unlinked = true;
        }
        self.geo.write_entry(&mut host.hmem, ea, Pte(0));
    }
}
