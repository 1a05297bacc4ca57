//! Errors for bad input and broken invariants.
//!
//! Simulated outcomes (TLB misses, guest faults, nested faults) are values, never errors; an
//! `Error` means the user gave vmmu something it cannot run, and its message names what and where.

use thiserror::Error;

/// Everything that can stop a simulation before or while it runs.
#[derive(Debug, Error)]
pub enum Error {
    /// A configuration value is out of range or inconsistent; `field` is its dotted path.
    #[error("invalid configuration: {field}: {reason}")]
    Config {
        /// Dotted path of the offending field, e.g. `machine.tlb.l1d[0].ways`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A workload specification (`NAME:k=v,...`) cannot be understood.
    #[error("invalid workload `{spec}`: {reason}")]
    Workload {
        /// The specification as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A text trace line is malformed.
    #[error("{path}:{line}: {reason}")]
    TraceLine {
        /// The trace file.
        path: String,
        /// 1-based line number.
        line: u64,
        /// What was expected.
        reason: String,
    },
    /// A binary trace is truncated or corrupt.
    #[error("{path}: corrupt trace at byte offset {offset}: {reason}")]
    TraceCorrupt {
        /// The trace file.
        path: String,
        /// Byte offset in the file where the problem was found.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// An address the model cannot accept (non-canonical, beyond the paging format's reach).
    #[error("bad address {addr:#x} at event {event}: {reason}")]
    Address {
        /// The address.
        addr: u64,
        /// 0-based index of the event in the workload.
        event: u64,
        /// Why it is rejected.
        reason: String,
    },
    /// An OS event that cannot happen (exit of an unknown process, munmap of nothing...).
    #[error("impossible event at position {event}: {what}: {reason}")]
    Event {
        /// 0-based index of the event in the workload.
        event: u64,
        /// The event, printed.
        what: String,
        /// Why it cannot happen.
        reason: String,
    },
    /// Simulated memory is exhausted (guest or host physical memory too small for the workload).
    #[error("out of {space} memory: {reason}")]
    OutOfMemory {
        /// `guest physical` or `host physical`.
        space: &'static str,
        /// Sizes involved and what to change.
        reason: String,
    },
    /// The checked mode found a translation that differs from the composition of the mappings.
    #[error("translation check failed at event {event}: {detail}")]
    Check {
        /// 0-based index of the event.
        event: u64,
        /// Both translations and the path that produced them.
        detail: String,
    },
    /// The run was interrupted (Ctrl-C, or a progress callback asked to stop).
    #[error("interrupted after {events} events")]
    Interrupted {
        /// Events simulated before the stop.
        events: u64,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Result with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A configuration error for `field`.
    pub fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Config {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The error with its event index set to `event`, for errors raised below the event loop,
    /// which does not know the index (the others are returned unchanged).
    pub fn at(self, event: u64) -> Self {
        match self {
            Error::Check { detail, .. } => Error::Check { event, detail },
            Error::Event { what, reason, .. } => Error::Event {
                event,
                what,
                reason,
            },
            Error::Address { addr, reason, .. } => Error::Address {
                addr,
                event,
                reason,
            },
            other => other,
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// ``"did you mean `X`? "`` for the known name nearest `name` ([`nearest`]), or `""` when
/// none is near: the hint an error about an unknown name (a generator, a parameter, a preset,
/// a profile, a policy) puts before its list of the known ones.
pub fn did_you_mean<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    nearest(name, known).map_or_else(String::new, |k| format!("did you mean `{k}`? "))
}

/// The known name a user most likely meant by `name`, if any: one that holds `name` as a word
/// or starts with it (a renamed `gcc` is `gcc-phases`, `bhargava` is `bhargava08`), else one
/// at most a third of `name`'s length of single-character edits away (Levenshtein distance,
/// at least one edit: `randon` is `random`). Case is ignored; ties go to the first known.
pub fn nearest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let want = name.to_lowercase();
    if want.is_empty() {
        return None;
    }
    let known: Vec<(&str, String)> = known.into_iter().map(|k| (k, k.to_lowercase())).collect();
    let closest = |candidates: &mut dyn Iterator<Item = &(&'a str, String)>| {
        candidates
            .map(|(k, low)| (edits(&want, low), *k))
            .min_by_key(|(d, _)| *d)
    };
    let holds = |low: &String| {
        low.starts_with(&want) || low.split(['-', '_', '.']).any(|word| word == want)
    };
    if let Some((_, k)) = closest(&mut known.iter().filter(|(_, low)| holds(low))) {
        return Some(k);
    }
    let most = (want.chars().count() / 3).max(1);
    closest(&mut known.iter())
        .filter(|(d, _)| *d <= most)
        .map(|(_, k)| k)
}

/// The Levenshtein distance between `a` and `b`: insertions, deletions and substitutions of
/// one character that turn one into the other.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diag + usize::from(ca != *cb));
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edits("", ""), 0);
        assert_eq!(edits("random", "random"), 0);
        assert_eq!(edits("randon", "random"), 1);
        assert_eq!(edits("kitten", "sitting"), 3);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(edits("stream", "strem"), 1);
    }

    #[test]
    fn nearest_prefers_a_word_or_prefix_then_few_edits() {
        let known = ["stream", "random", "gcc-phases", "gzip", "mixed-phases"];
        assert_eq!(nearest("gcc", known), Some("gcc-phases"));
        assert_eq!(nearest("RANDON", known), Some("random"));
        assert_eq!(nearest("phases", known), Some("gcc-phases"));
        assert_eq!(nearest("zzzzzz", known), None);
        assert_eq!(nearest("", known), None);
        assert_eq!(did_you_mean("strem", known), "did you mean `stream`? ");
        assert_eq!(did_you_mean("qqq", known), "");
    }
}
