//! What every paging mode uses and what outlives a switch: host memory and the nested tables,
//! the bill, the cost profile, the backing, and the shadow cache kept across switches.

use super::exits::Account;
use crate::config::{AgileConfig, CostProfile, ShadowConfig};
use crate::host::Host;
use crate::paging::Geometry;
use crate::shadow::{ShadowPager, ShadowStats};

/// What every mode uses and what outlives a switch.
pub(super) struct Shared {
    /// Host memory and the nested tables.
    pub(super) host: Host,
    /// The bill.
    pub(super) acct: Account,
    /// The cost profile.
    pub(super) costs: CostProfile,
    /// Guest memory is backed on first use (nested faults), not when the guest allocates it.
    pub(super) lazy: bool,
    /// Shadow tables were removed: every other vCPU must flush.
    pub(super) remote_flush: bool,
    /// The shadow cache across switches.
    pub(super) shadow: ShadowCache,
    /// Agile paging's policy parameters.
    pub(super) agile: AgileConfig,
}

/// The shadow cache across mode switches, and what a shadow pager is built with.
pub(super) struct ShadowCache {
    /// A shadow cache kept while the VM runs under nested paging.
    pub(super) parked: Option<Box<ShadowPager>>,
    /// Counters of shadow pagers dropped at mode switches.
    pub(super) retired: ShadowStats,
    /// What a shadow pager is built with.
    pub(super) cfg: ShadowConfig,
    /// The guest's paging format, which the shadow tables share.
    pub(super) geo: Geometry,
    /// Switches to nested paging park the cache instead of dropping it.
    pub(super) keep: bool,
}

impl ShadowCache {
    /// No cache yet, for pagers of `cfg` over guest tables of format `geo`.
    pub(super) fn new(cfg: &ShadowConfig, geo: Geometry, keep: bool) -> Self {
        ShadowCache {
            parked: None,
            retired: ShadowStats::default(),
            cfg: cfg.clone(),
            geo,
            keep,
        }
    }

    /// The counters of every shadow pager of the run — `active`'s (the running one's), the
    /// parked one's, the dropped ones' — when the VM ran under shadow paging at all
    /// (`switched`: it changed mode).
    pub(super) fn stats(&self, active: Option<ShadowStats>, switched: bool) -> Option<ShadowStats> {
        let mut pagers = active
            .into_iter()
            .chain(self.parked.as_ref().map(|sp| sp.stats()))
            .peekable();
        let ran = pagers.peek().is_some() || self.retired.pages_built > 0 || switched;
        ran.then(|| {
            let mut total = self.retired;
            for s in pagers {
                total.absorb(&s);
            }
            total
        })
    }

    /// Zeroes the counters of the parked and the dropped pagers.
    pub(super) fn reset_stats(&mut self) {
        self.retired = ShadowStats::default();
        if let Some(sp) = &mut self.parked {
            sp.reset_stats();
        }
    }
}
