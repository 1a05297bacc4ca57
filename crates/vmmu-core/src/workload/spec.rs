//! Parsing of workload specifications, `NAME[:k=v,k=v...]`.
//!
//! Every generator declares its parameters once, as a table of [`ParamDef`] (name, default,
//! description). The same table validates a specification (an unknown name is an error that
//! lists the table), supplies the defaults, and is what `vmmu workloads` prints, so the
//! documentation cannot drift from what the parser accepts (the Ramulator 2 habit of declaring a
//! parameter with its default where it is used, without its late discovery of typos).

use crate::addr::{parse_bytes, parse_count};
use crate::error::{Error, Result};

/// One declared parameter of a generator.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ParamDef {
    pub name: &'static str,
    pub default: &'static str,
    pub description: &'static str,
}

/// A specification split into its generator name and its `k=v` pairs, in the order given.
#[derive(Debug)]
pub(crate) struct Spec<'s> {
    /// The whole specification as given (for error messages).
    pub text: &'s str,
    /// The generator name.
    pub name: &'s str,
    /// The `k=v` pairs, keys unique.
    pub pairs: Vec<(&'s str, &'s str)>,
}

impl<'s> Spec<'s> {
    /// Splits `NAME[:k=v,...]`; rejects empty names, pairs without `=`, empty keys or values
    /// and repeated keys.
    pub fn parse(text: &'s str) -> Result<Spec<'s>> {
        let trimmed = text.trim();
        let (name, rest) = match trimmed.split_once(':') {
            Some((n, r)) => (n.trim(), r),
            None => (trimmed, ""),
        };
        if name.is_empty() {
            return Err(workload_error(
                text,
                "no generator name: expected `NAME[:k=v,...]`, e.g. `random:footprint=1G`",
            ));
        }
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        for item in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((k, v)) = item.split_once('=') else {
                return Err(workload_error(
                    text,
                    format!("`{item}` is not a `key=value` pair"),
                ));
            };
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() || v.is_empty() {
                return Err(workload_error(
                    text,
                    format!("`{item}`: expected `key=value` with both sides non-empty"),
                ));
            }
            if pairs.iter().any(|(seen, _)| *seen == k) {
                return Err(workload_error(
                    text,
                    format!("parameter `{k}` is given twice"),
                ));
            }
            pairs.push((k, v));
        }
        Ok(Spec { text, name, pairs })
    }
}

/// An `Error::Workload` for `spec`.
pub(crate) fn workload_error(spec: &str, reason: impl Into<String>) -> Error {
    Error::Workload {
        spec: spec.to_string(),
        reason: reason.into(),
    }
}

/// Resolved parameter values of one generator: the given ones over the declared defaults.
pub(crate) struct Values<'a> {
    spec: &'a str,
    /// The prefix under which the parameters were given (`a.` inside `phases`), for messages.
    prefix: String,
    defs: Vec<ParamDef>,
    given: Vec<(String, String)>,
}

impl<'a> Values<'a> {
    /// Checks every given key against `defs` and keeps the pairs.
    pub fn new(
        spec: &'a str,
        generator: &str,
        prefix: &str,
        defs: Vec<ParamDef>,
        given: Vec<(String, String)>,
    ) -> Result<Values<'a>> {
        for (k, _) in &given {
            if !defs.iter().any(|d| d.name == k) {
                let known: Vec<String> =
                    defs.iter().map(|d| format!("{prefix}{}", d.name)).collect();
                return Err(workload_error(
                    spec,
                    format!(
                        "unknown parameter `{prefix}{k}` for generator `{generator}`; {}its parameters are: {}",
                        crate::error::did_you_mean(k, defs.iter().map(|d| d.name)),
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(Values {
            spec,
            prefix: prefix.to_string(),
            defs,
            given,
        })
    }

    /// The raw text of parameter `key`: as given, or its declared default.
    pub fn raw(&self, key: &str) -> &str {
        if let Some((_, v)) = self.given.iter().find(|(k, _)| k == key) {
            return v;
        }
        self.defs
            .iter()
            .find(|d| d.name == key)
            .map(|d| d.default)
            .unwrap_or_else(|| panic!("parameter `{key}` is not declared"))
    }

    /// An error about parameter `key`.
    pub fn error(&self, key: &str, reason: impl std::fmt::Display) -> Error {
        workload_error(
            self.spec,
            format!("parameter `{}{key}`: {reason}", self.prefix),
        )
    }

    fn expected(&self, key: &str, what: &str) -> Error {
        self.error(key, format!("expected {what}, found `{}`", self.raw(key)))
    }

    /// A byte size (`64M`, `4096`, `1.5G`; binary multiples).
    pub fn bytes(&self, key: &str) -> Result<u64> {
        parse_bytes(self.raw(key))
            .ok_or_else(|| self.expected(key, "a byte size such as `64M`, `4096` or `1.5G`"))
    }

    /// A count (`1M` = 10^6, `100K`, `1e6`).
    pub fn count(&self, key: &str) -> Result<u64> {
        parse_count(self.raw(key))
            .ok_or_else(|| self.expected(key, "a count such as `1000`, `100K`, `1M` or `1e6`"))
    }

    /// A count that fits in 32 bits.
    pub fn count_u32(&self, key: &str) -> Result<u32> {
        let v = self.count(key)?;
        u32::try_from(v).map_err(|_| self.expected(key, "a count below 2^32"))
    }

    /// A fraction in [0, 1].
    pub fn ratio(&self, key: &str) -> Result<f64> {
        let v = self.float(key)?;
        if !(0.0..=1.0).contains(&v) {
            return Err(self.expected(key, "a fraction between 0 and 1"));
        }
        Ok(v)
    }

    /// A finite, non-negative real number.
    pub fn float(&self, key: &str) -> Result<f64> {
        match self.raw(key).parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(self.expected(key, "a non-negative number such as `0.99`")),
        }
    }

    /// A switch: `0`/`1`, `false`/`true`, `no`/`yes`, `off`/`on`.
    pub fn flag(&self, key: &str) -> Result<bool> {
        match self.raw(key).to_ascii_lowercase().as_str() {
            "0" | "false" | "no" | "off" => Ok(false),
            "1" | "true" | "yes" | "on" => Ok(true),
            _ => Err(self.expected(key, "`0`, `1`, `true` or `false`")),
        }
    }

    /// A 64-bit integer, decimal or `0x` hexadecimal (seeds).
    pub fn integer(&self, key: &str) -> Result<u64> {
        let raw = self.raw(key).replace('_', "");
        let parsed = match raw.strip_prefix("0x").or_else(|| raw.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => raw.parse::<u64>(),
        };
        parsed.map_err(|_| self.expected(key, "an integer (decimal or 0x hexadecimal)"))
    }

    /// One of `choices`.
    pub fn choice(&self, key: &str, choices: &[&'static str]) -> Result<&'static str> {
        let raw = self.raw(key);
        choices
            .iter()
            .copied()
            .find(|c| c.eq_ignore_ascii_case(raw))
            .ok_or_else(|| self.expected(key, &format!("one of {}", choices.join(", "))))
    }

    /// A positive multiple of 8 bytes (the access size): strides, element and node sizes.
    pub fn multiple_of_8(&self, key: &str) -> Result<u64> {
        let v = self.bytes(key)?;
        if v == 0 || v % 8 != 0 {
            return Err(self.expected(key, "a positive multiple of 8 bytes (the access size)"));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_split_into_name_and_pairs() {
        let s = Spec::parse(" random : footprint=1G, refs=1M ").unwrap();
        assert_eq!(s.name, "random");
        assert_eq!(s.pairs, vec![("footprint", "1G"), ("refs", "1M")]);
        let s = Spec::parse("stream").unwrap();
        assert!(s.pairs.is_empty());
    }

    #[test]
    fn malformed_pairs_are_rejected() {
        assert!(Spec::parse("random:footprint").is_err());
        assert!(Spec::parse("random:=3").is_err());
        assert!(Spec::parse("random:refs=1,refs=2").is_err());
        assert!(Spec::parse(":refs=1").is_err());
    }
}
