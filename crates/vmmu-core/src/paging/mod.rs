//! x86 page tables stored as real bytes in simulated physical memory.
