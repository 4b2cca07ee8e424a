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

use postgres::types::ToSql;

use self::conn::{Conn, Pool, Role};
use self::tables::{Table, Val};
use super::{Kv, Write};
use crate::error::{Error, Result};

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
        // Rows are built before the transaction starts: a value that does not parse fails
        // the commit with nothing sent.
        let mut ops = Vec::with_capacity(writes.len());
        for (key, value) in writes {
            let table = Table::of(&key);
            ops.push(match value {
                Some(v) => Op::Put(table, key.clone(), tables::rows(table, &key, &v)?),
                None => Op::Delete(table, key),
            });
        }
        self.writer()?.run(move |conn| {
            let (client, statements) = conn.parts();
            let mut tx = client.transaction()?;
            for op in ops {
                match op {
                    Op::Delete(table, key) => delete(statements, &mut tx, table, key)?,
                    Op::Put(table, key, rows) => {
                        // Replacing a row replaces what was derived from it too (cascade).
                        delete(statements, &mut tx, table, key)?;
                        for row in rows {
                            insert(statements, &mut tx, row)?;
                        }
                    }
                }
            }
            tx.commit()?;
            Ok(())
        })
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

enum Op {
    Put(Table, Vec<u8>, Vec<tables::Row>),
    Delete(Table, Vec<u8>),
}

fn delete(
    statements: &mut std::collections::HashMap<String, postgres::Statement>,
    tx: &mut postgres::Transaction<'_>,
    table: Table,
    key: Vec<u8>,
) -> Result<()> {
    let sql = format!("DELETE FROM {} WHERE k = $1", table.name());
    let stmt = Conn::prepare(statements, tx, &sql)?;
    tx.execute(&stmt, &[&key])?;
    Ok(())
}

fn insert(
    statements: &mut std::collections::HashMap<String, postgres::Statement>,
    tx: &mut postgres::Transaction<'_>,
    row: tables::Row,
) -> Result<()> {
    let names: Vec<&str> = row.cols.iter().map(|(n, _)| *n).collect();
    let placeholders: Vec<String> = row
        .cols
        .iter()
        .enumerate()
        .map(|(i, (_, v))| v.placeholder(i + 1))
        .collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        row.table,
        names.join(", "),
        placeholders.join(", ")
    );
    let stmt = Conn::prepare(statements, tx, &sql)?;
    let params: Vec<Box<dyn ToSql + Sync + Send>> =
        row.cols.iter().map(|(_, v): &(_, Val)| v.param()).collect();
    let refs: Vec<&(dyn ToSql + Sync)> = params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect();
    tx.execute(&stmt, &refs)?;
    Ok(())
}
