//! Simulated physical memory and frame allocators.
