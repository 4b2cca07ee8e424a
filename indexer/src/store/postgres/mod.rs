//! The PostgreSQL store: the key space in one table per entity ([`tables`]), one transaction
//! per commit, one writer and any number of readers, in any number of processes.
//!
//! The follower opens the database with [`PgKv::open`] and holds its writer lock (a
//! session-level advisory lock: a second follower is refused with [`Error::WriterLocked`]
//! until the first one's connection ends, `kill -9` included); `serve` processes open it with
//! [`PgKv::open_reader`] and see each block's commit whole or not at all. Opening migrates
//! the schema to the newest version (refinery, `indexer/migrations`).

mod conn;
mod tables;

use std::time::Duration;

use ganglion_contracts::params::KeyHash;
use ganglion_contracts::v2::datum::JobId;

use self::conn::{Conn, Pool, Role};
use self::tables::{Batch, Table};
use super::{Kv, Write};
use crate::apply::parse;
use crate::error::{Error, Result};
use crate::query::PaymentRecord;
use crate::view::{JobStatus, JobView};

/// Connections each reader pool opens.
const READERS: usize = 2;

/// How long [`PgKv::open`] waits for a previous writer's lock (a follower killed a moment
/// ago holds it until the server sees its connection close), seconds.
pub const WRITER_WAIT_S: u64 = 10;

/// A [`Kv`] in a PostgreSQL database (`postgres://user@host:port/db`, libpq's URL form).
pub struct PgKv {
    readers: Pool,
    writer: Option<Pool>,
}

impl std::fmt::Debug for PgKv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgKv")
            .field("writer", &self.writer.is_some())
            .finish_non_exhaustive()
    }
}

impl PgKv {
    /// Opens the database as its one writer, migrating the schema first; waits up to
    /// [`WRITER_WAIT_S`] for another writer's lock.
    ///
    /// # Errors
    /// [`Error::Postgres`] (unreachable server, authentication, a malformed URL),
    /// [`Error::Migration`], [`Error::WriterLocked`] when another follower writes it.
    pub fn open(url: &str) -> Result<Self> {
        Self::open_writer(url, Duration::from_secs(WRITER_WAIT_S))
    }

    /// [`Self::open`], waiting at most `wait` for another writer's lock.
    ///
    /// # Errors
    /// As [`Self::open`].
    pub fn open_writer(url: &str, wait: Duration) -> Result<Self> {
        conn::migrate(url)?;
        Ok(Self {
            writer: Some(Pool::open(url, Role::Writer(wait), 1)?),
            readers: Pool::open(url, Role::Reader, READERS)?,
        })
    }

    /// Opens the database read-only (a `serve` process beside the follower): commits fail
    /// with [`Error::ReadOnly`].
    ///
    /// # Errors
    /// As [`Self::open`], except that the writer lock is not taken.
    pub fn open_reader(url: &str) -> Result<Self> {
        conn::migrate(url)?;
        Ok(Self {
            writer: None,
            readers: Pool::open(url, Role::Reader, READERS)?,
        })
    }

    /// Whether this handle may commit.
    pub fn is_writer(&self) -> bool {
        self.writer.is_some()
    }

    fn writer(&self) -> Result<&Pool> {
        self.writer.as_ref().ok_or(Error::ReadOnly)
    }

    /// Rows with `from <= key < to` (`to = None`: no upper bound) from every table that can
    /// hold such keys, in key order (`bytea` compares bytewise, as sled does).
    fn select(&self, from: Vec<u8>, to: Option<Vec<u8>>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let upper = if to.is_some() { " AND k < $2" } else { "" };
        let parts: Vec<String> = Table::ALL
            .into_iter()
            .filter(|t| t.meets(&from, to.as_deref()))
            .map(|t| {
                format!(
                    "SELECT k, {} AS v FROM {} WHERE k >= $1{upper}",
                    t.body_bytes(),
                    t.name()
                )
            })
            .collect();
        let sql = format!("{} ORDER BY k", parts.join(" UNION ALL "));
        self.readers.run(move |conn: &mut Conn| {
            let (client, statements) = conn.parts();
            let stmt = Conn::prepare(statements, client, &sql)?;
            let rows = match &to {
                Some(to) => client.query(&stmt, &[&from, to])?,
                None => client.query(&stmt, &[&from])?,
            };
            Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }
}

impl Kv for PgKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let t = Table::of(key);
        let sql = format!("SELECT {} FROM {} WHERE k = $1", t.body_bytes(), t.name());
        let key = key.to_vec();
        self.readers.run(move |conn| {
            let (client, statements) = conn.parts();
            let stmt = Conn::prepare(statements, client, &sql)?;
            Ok(client.query_opt(&stmt, &[&key])?.map(|r| r.get(0)))
        })
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.select(prefix.to_vec(), tables::successor(prefix))
    }

    fn range(&self, from: &[u8], to: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if from >= to {
            return Ok(Vec::new());
        }
        self.select(from.to_vec(), Some(to.to_vec()))
    }

    fn commit(&self, writes: Vec<Write>) -> Result<()> {
        // Everything is built before the transaction starts (a value that does not parse
        // fails the commit with nothing sent): per table, the keys to delete — every key
        // written, since a put replaces its row and what was derived from it (cascade) — and
        // the rows to insert, column by column. Then one statement per table and step.
        let mut rows = Vec::new();
        for (key, value) in &writes {
            if let Some(v) = value {
                rows.extend(tables::rows(Table::of(key), key, v)?);
            }
        }
        let deletes = by_table(writes.into_iter().map(|(key, _)| key));
        let batches = Batch::group(rows)?;
        self.writer()?.run(move |conn| {
            let (client, statements) = conn.parts();
            let mut tx = client.transaction()?;
            for (table, keys) in &deletes {
                let sql = format!("DELETE FROM {} WHERE k = ANY($1::bytea[])", table.name());
                let stmt = Conn::prepare(statements, &mut tx, &sql)?;
                tx.execute(&stmt, &[keys])?;
            }
            for batch in &batches {
                let stmt = Conn::prepare(statements, &mut tx, &batch.sql())?;
                tx.execute(&stmt, &batch.params())?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn payments_to(
        &self,
        payee: &KeyHash,
        skip: usize,
        take: usize,
    ) -> Result<Option<Vec<PaymentRecord>>> {
        let payee = payee.to_vec();
        let (skip, take) = (sql_count(skip), sql_count(take));
        let rows = self.readers.run(move |conn| {
            let (client, statements) = conn.parts();
            let stmt = Conn::prepare(
                statements,
                client,
                "SELECT p.slot, p.tx_hash, e.tx_index, p.job_id, p.ntx::text \
                 FROM payments p JOIN events e ON e.k = p.event_k \
                 WHERE p.payee = $1 AND p.kind = 'pay' \
                 ORDER BY p.slot DESC, p.event_k DESC LIMIT $2 OFFSET $3",
            )?;
            Ok(client.query(&stmt, &[&payee, &take, &skip])?)
        })?;
        rows.into_iter()
            .map(|r| {
                let corrupt = |what: &'static str| Error::Corrupt {
                    what,
                    source: serde::de::Error::custom("a payments row out of shape"),
                };
                Ok(PaymentRecord {
                    slot: u64::try_from(r.get::<_, i64>(0)).map_err(|_| corrupt("payment slot"))?,
                    tx_hash: r
                        .get::<_, Vec<u8>>(1)
                        .try_into()
                        .map_err(|_| corrupt("payment tx hash"))?,
                    tx_index: u32::try_from(r.get::<_, i64>(2))
                        .map_err(|_| corrupt("payment tx index"))?,
                    job_id: JobId(
                        r.get::<_, Vec<u8>>(3)
                            .try_into()
                            .map_err(|_| corrupt("payment job id"))?,
                    ),
                    ntx: r
                        .get::<_, String>(4)
                        .parse()
                        .map_err(|_| corrupt("payment amount"))?,
                })
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    fn jobs_page(
        &self,
        status: Option<JobStatus>,
        skip: usize,
        take: usize,
        desc: bool,
    ) -> Result<Option<Vec<JobView>>> {
        let order = if desc { "DESC" } else { "ASC" };
        let filter = if status.is_some() {
            "WHERE status = $3"
        } else {
            ""
        };
        let sql =
            format!("SELECT body::text FROM jobs {filter} ORDER BY k {order} LIMIT $1 OFFSET $2");
        let (take, skip) = (sql_count(take), sql_count(skip));
        let status = status.map(tables::status_name);
        let bodies: Vec<String> = self.readers.run(move |conn| {
            let (client, statements) = conn.parts();
            let stmt = Conn::prepare(statements, client, &sql)?;
            let rows = match status {
                Some(s) => client.query(&stmt, &[&take, &skip, &s])?,
                None => client.query(&stmt, &[&take, &skip])?,
            };
            Ok(rows.into_iter().map(|r| r.get(0)).collect())
        })?;
        bodies
            .iter()
            .map(|b| parse::<JobView>("job", b.as_bytes()))
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        // One query per table: `k = ANY($1)`.
        let groups = by_table(keys.iter().cloned());
        let found = self.readers.run(move |conn| {
            let (client, statements) = conn.parts();
            let mut found = std::collections::HashMap::new();
            for (table, keys) in &groups {
                let sql = format!(
                    "SELECT k, {} FROM {} WHERE k = ANY($1::bytea[])",
                    table.body_bytes(),
                    table.name()
                );
                let stmt = Conn::prepare(statements, client, &sql)?;
                for row in client.query(&stmt, &[keys])? {
                    found.insert(row.get::<_, Vec<u8>>(0), row.get::<_, Vec<u8>>(1));
                }
            }
            Ok(found)
        })?;
        Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
    }

    fn flush(&self) -> Result<()> {
        let Some(writer) = &self.writer else {
            return Ok(());
        };
        // A transaction that writes (an xid is assigned) and commits synchronously: its
        // commit waits for the WAL up to it, hence for every earlier commit, to reach disk.
        writer.run(|conn| {
            conn.client.batch_execute(
                "BEGIN; SET LOCAL synchronous_commit = on; SELECT txid_current(); COMMIT",
            )?;
            Ok(())
        })
    }
}

/// `keys` grouped by the table holding them, tables in order of first appearance.
fn by_table(keys: impl Iterator<Item = Vec<u8>>) -> Vec<(Table, Vec<Vec<u8>>)> {
    let mut groups: Vec<(Table, Vec<Vec<u8>>)> = Vec::new();
    for key in keys {
        let table = Table::of(&key);
        match groups.iter_mut().find(|(t, _)| *t == table) {
            Some((_, ks)) => ks.push(key),
            None => groups.push((table, vec![key])),
        }
    }
    groups
}

/// A row count or offset for `LIMIT`/`OFFSET` (`bigint`; beyond it, as many as there are).
fn sql_count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
