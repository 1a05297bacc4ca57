//! Hardware structures: TLBs, page-walk caches, the Nested TLB, paging-structure caches and the
//! cache hierarchy. They know nothing of hypervisors or trace formats (DESIGN.md "Architecture").
