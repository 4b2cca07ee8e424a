//! The store a configuration names: a sled folder or a PostgreSQL URL.

use std::path::PathBuf;
use std::str::FromStr;

use ganglion_contracts::params::KeyHash;

use super::{Kv, PgKv, SledKv, Write};
use crate::error::{Error, Result};
use crate::query::PaymentRecord;
use crate::view::{JobStatus, JobView};

/// Where the index lives: `postgres://…` / `postgresql://…` (libpq URL) or a folder (sled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// A sled database in this folder.
    Sled(PathBuf),
    /// A PostgreSQL database at this URL.
    Postgres(String),
}

impl FromStr for StoreSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Ok(Self::Postgres(s.to_owned()))
        } else if s.is_empty() || s.contains("://") {
            Err(Error::StoreSpec(s.to_owned()))
        } else {
            Ok(Self::Sled(PathBuf::from(s)))
        }
    }
}

impl std::fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sled(p) => write!(f, "{}", p.display()),
            // The URL may carry a password: show the server and database only.
            Self::Postgres(url) => {
                let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
                let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
                write!(f, "postgres://…@{host}")
            }
        }
    }
}

/// A [`Kv`] chosen at run time.
#[derive(Debug)]
pub enum Store {
    /// Embedded, on disk.
    Sled(SledKv),
    /// In PostgreSQL.
    Postgres(PgKv),
}

impl Store {
    /// Opens the store as its writer (the follower).
    ///
    /// # Errors
    /// As [`SledKv::open`] and [`PgKv::open`].
    pub fn open(spec: &StoreSpec) -> Result<Self> {
        Ok(match spec {
            StoreSpec::Sled(dir) => Self::Sled(SledKv::open(dir)?),
            StoreSpec::Postgres(url) => Self::Postgres(PgKv::open(url)?),
        })
    }

    /// Opens the store read-only, beside a follower in another process. Only PostgreSQL can
    /// be shared so; a sled database belongs to one process.
    ///
    /// # Errors
    /// As [`PgKv::open_reader`]; [`Error::StoreSpec`] for a sled folder.
    pub fn open_reader(spec: &StoreSpec) -> Result<Self> {
        match spec {
            StoreSpec::Postgres(url) => Ok(Self::Postgres(PgKv::open_reader(url)?)),
            StoreSpec::Sled(dir) => Err(Error::StoreSpec(format!(
                "{} (a sled database has one process: serve it with --follow, or use PostgreSQL)",
                dir.display()
            ))),
        }
    }

    /// False for a read-only PostgreSQL handle.
    pub fn is_writer(&self) -> bool {
        match self {
            Self::Sled(_) => true,
            Self::Postgres(p) => p.is_writer(),
        }
    }

    fn kv(&self) -> &dyn Kv {
        match self {
            Self::Sled(s) => s,
            Self::Postgres(p) => p,
        }
    }
}

impl Kv for Store {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.kv().get(key)
    }

    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        self.kv().get_many(keys)
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.kv().scan_prefix(prefix)
    }

    fn range(&self, from: &[u8], to: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.kv().range(from, to)
    }

    fn payments_to(
        &self,
        payee: &KeyHash,
        skip: usize,
        take: usize,
    ) -> Result<Option<Vec<PaymentRecord>>> {
        self.kv().payments_to(payee, skip, take)
    }

    fn jobs_page(
        &self,
        status: Option<JobStatus>,
        skip: usize,
        take: usize,
        desc: bool,
    ) -> Result<Option<Vec<JobView>>> {
        self.kv().jobs_page(status, skip, take, desc)
    }

    fn commit(&self, writes: Vec<Write>) -> Result<()> {
        self.kv().commit(writes)
    }

    fn flush(&self) -> Result<()> {
        self.kv().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_is_a_postgres_url_or_a_folder() {
        assert_eq!(
            "postgres://u:secret@db:5432/ix".parse::<StoreSpec>().ok(),
            Some(StoreSpec::Postgres("postgres://u:secret@db:5432/ix".into()))
        );
        assert_eq!(
            "./ix".parse::<StoreSpec>().ok(),
            Some(StoreSpec::Sled("./ix".into()))
        );
        assert!("mysql://db/ix".parse::<StoreSpec>().is_err());
        assert!("".parse::<StoreSpec>().is_err());
        let shown = StoreSpec::Postgres("postgres://u:secret@db:5432/ix".into()).to_string();
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("db:5432/ix"), "{shown}");
    }
}
