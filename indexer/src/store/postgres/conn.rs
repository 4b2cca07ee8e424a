//! Connections on threads of their own. The `postgres` client drives its socket on a private
//! Tokio runtime, which must not run inside another runtime's thread; the store is opened and
//! called from async tasks (the node, the HTTP API), so each connection is opened and lives on
//! a plain thread and takes its work from a queue. A closed connection (the server restarted) is reopened on the next
//! piece of work.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, Sender, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use postgres::{Client, NoTls, Statement};

use crate::error::{Error, Result};

/// Session-level advisory lock held by the one writer of a database.
const WRITER_LOCK: i64 = 0x6761_6e67_6c69_6f6e; // "ganglion"
/// Advisory lock serialising schema migrations between processes opening the same database.
const MIGRATION_LOCK: i64 = WRITER_LOCK + 1;

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Reads only.
    Reader,
    /// The one writer: holds [`WRITER_LOCK`] for as long as it is connected (waiting up to
    /// the given time for a previous writer's to be released), and commits without waiting
    /// for the WAL flush (`flush` waits for it).
    Writer(Duration),
}

/// One connection and its prepared statements.
pub(super) struct Conn {
    pub(super) client: Client,
    statements: HashMap<String, Statement>,
}

impl Conn {
    fn open(url: &str, role: Role) -> Result<Self> {
        let mut client = Client::connect(url, NoTls)?;
        if let Role::Writer(wait) = role {
            // A writer killed a moment ago holds the lock until the server sees its
            // connection close: wait for that, as sled's open waits for a file lock.
            let deadline = Instant::now() + wait;
            loop {
                let row = client.query_one("SELECT pg_try_advisory_lock($1)", &[&WRITER_LOCK])?;
                if row.get::<_, bool>(0) {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(Error::WriterLocked);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // A commit is atomic and ordered either way; it just does not wait for the disk.
            // After a server crash the store is at an earlier block, never part of one, and the
            // follower goes on from its cursor. `flush` waits for everything committed.
            client.batch_execute("SET synchronous_commit = off")?;
        }
        Ok(Self {
            client,
            statements: HashMap::new(),
        })
    }

    /// A statement prepared once per connection.
    pub(super) fn prepare(
        statements: &mut HashMap<String, Statement>,
        client: &mut impl postgres::GenericClient,
        sql: &str,
    ) -> Result<Statement> {
        if let Some(s) = statements.get(sql) {
            return Ok(s.clone());
        }
        let s = client.prepare(sql)?;
        statements.insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    /// The client and the statement cache, borrowed apart (a transaction borrows the client).
    pub(super) fn parts(&mut self) -> (&mut Client, &mut HashMap<String, Statement>) {
        (&mut self.client, &mut self.statements)
    }
}

/// Brings the schema to the newest migration (`indexer/migrations`, refinery), under an
/// advisory lock so that processes opening the same database at once migrate it once.
/// Runs on a thread of its own, like every connection here (safe to call from async code).
pub(super) fn migrate(url: &str) -> Result<()> {
    let url = url.to_owned();
    let run = move || -> Result<()> {
        let mut client = Client::connect(&url, NoTls)?;
        client.query_one("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])?;
        let report = embedded::migrations::runner().run(&mut client);
        client.query_one("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])?;
        report.map_err(|e| Error::Migration(Box::new(e)))?;
        Ok(())
    };
    std::thread::Builder::new()
        .name("indexer-pg-migrate".into())
        .spawn(run)
        .map_err(|e| Error::Thread(e.to_string()))?
        .join()
        .map_err(|_| Error::Thread("the migration thread panicked".into()))?
}

/// A piece of work: handed its connection, or why none could be (re)opened.
type Work = Box<dyn FnOnce(Result<&mut Conn>) + Send>;

/// Connections of one role, each on its own thread, sharing one queue. Dropping the pool
/// closes the queue and waits for the threads: a writer's lock is released when the drop
/// returns.
pub(super) struct Pool {
    queue: Mutex<Option<Sender<Work>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// Opens `size` connections (the first error is returned).
    pub(super) fn open(url: &str, role: Role, size: usize) -> Result<Self> {
        let (tx, rx) = channel::<Work>();
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::new();
        for _ in 0..size.max(1) {
            let (rx, url) = (rx.clone(), url.to_owned());
            let name = match role {
                Role::Reader => "indexer-pg-reader",
                Role::Writer(_) => "indexer-pg-writer",
            };
            // The connection is opened on its thread; the first error comes back here.
            let (opened_tx, opened) = sync_channel(1);
            let thread = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || match Conn::open(&url, role) {
                    Ok(conn) => {
                        let _ = opened_tx.send(Ok(()));
                        serve(conn, &url, role, &rx);
                    }
                    Err(e) => {
                        let _ = opened_tx.send(Err(e));
                    }
                })
                .map_err(|e| Error::Thread(e.to_string()))?;
            threads.push(thread);
            opened.recv().map_err(|_| Error::StoreClosed)??;
        }
        Ok(Self {
            queue: Mutex::new(Some(tx)),
            threads,
        })
    }

    /// Runs `f` on one of the connections and waits for its answer.
    pub(super) fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = sync_channel(1);
        let work: Work = Box::new(move |conn| {
            let _ = tx.send(conn.and_then(f));
        });
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .ok_or(Error::StoreClosed)?
            .send(work)
            .map_err(|_| Error::StoreClosed)?;
        rx.recv().map_err(|_| Error::StoreClosed)?
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn serve(mut conn: Conn, url: &str, role: Role, queue: &Mutex<Receiver<Work>>) {
    loop {
        let work = match queue.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(w) => w,
            // The store was dropped: release the writer lock now rather than when the server
            // notices the closed connection, so that the next writer finds it free.
            Err(_) => {
                if matches!(role, Role::Writer(_)) && !conn.client.is_closed() {
                    let _ = conn
                        .client
                        .query_one("SELECT pg_advisory_unlock($1)", &[&WRITER_LOCK]);
                }
                return;
            }
        };
        if conn.client.is_closed() {
            match Conn::open(url, role) {
                Ok(c) => conn = c,
                Err(e) => {
                    tracing::warn!(error = %e, "reconnecting to PostgreSQL failed");
                    work(Err(e));
                    continue;
                }
            }
        }
        work(Ok(&mut conn));
    }
}
