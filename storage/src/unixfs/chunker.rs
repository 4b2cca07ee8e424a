//! The `--chunker` option. Only Kubo's fixed-size chunker is supported: content-defined chunkers
//! (`rabin`, `buzhash`) give other CIDs and are not part of the project's profiles.

use std::fmt;
use std::str::FromStr;

use super::Error;

/// Kubo's `--chunker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Chunker {
    /// `size-<bytes>`: fixed chunks of this many bytes (the last one shorter).
    Size(usize),
}

impl Chunker {
    /// Kubo's limit on chunk size (boxo `chunk.ChunkSizeLimit`, 1 MiB): larger blocks are
    /// refused by bitswap peers.
    pub const MAX_BYTES: usize = 1024 * 1024;

    /// Chunk size in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            Chunker::Size(n) => n,
        }
    }
}

impl Default for Chunker {
    /// `size-262144`: Kubo's default chunker (256 KiB).
    fn default() -> Self {
        Chunker::Size(256 * 1024)
    }
}

impl FromStr for Chunker {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self, Error> {
        let invalid = |reason| Error::InvalidChunker {
            spec: spec.to_owned(),
            reason,
        };
        let n = spec
            .strip_prefix("size-")
            .ok_or_else(|| invalid("only the fixed-size chunker `size-<bytes>` is supported"))?;
        let n: usize = n.parse().map_err(|_| invalid("size is not a number"))?;
        if n == 0 {
            return Err(invalid("size must be positive"));
        }
        if n > Self::MAX_BYTES {
            return Err(invalid("size exceeds Kubo's 1 MiB chunk limit"));
        }
        Ok(Chunker::Size(n))
    }
}

impl fmt::Display for Chunker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Chunker::Size(n) => write!(f, "size-{n}"),
        }
    }
}

impl TryFrom<String> for Chunker {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

impl From<Chunker> for String {
    fn from(c: Chunker) -> String {
        c.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubo_spelling() {
        assert_eq!(
            "size-262144".parse::<Chunker>().ok(),
            Some(Chunker::default())
        );
        assert_eq!(Chunker::Size(1048576).to_string(), "size-1048576");
    }

    #[test]
    fn rejects_other_chunkers_and_bad_sizes() {
        for bad in [
            "rabin-512-1024-2048",
            "buzhash",
            "size-0",
            "size-x",
            "size-1048577",
        ] {
            assert!(bad.parse::<Chunker>().is_err(), "{bad}");
        }
    }
}
