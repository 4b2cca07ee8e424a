//! The PostgreSQL store on a throwaway server (`initdb` + `pg_ctl`, [`Cluster`]): the same
//! conformance suite as sled, agreement with the in-memory spec across reopen, rollback ≡
//! replay, one writer and many readers, and the typed tables agreeing with the indexer's own
//! answers. The `kill -9` test is in `crash.rs`, the HTTP API's in `serve.rs`.

use std::time::Duration;

use ganglion_indexer::store::PgKv;
use ganglion_indexer::{Error, Indexer, JobStatus};
use ganglion_testnet::postgres::Cluster;
use proptest::test_runner::{Config, TestRunner};

use crate::rollback::{all, ops, replay, rollback_equals_replay_on, scenario};
use crate::scenario::run;
use crate::store::{agrees_with_memory_across_reopen, conformance};

pub(crate) fn cluster() -> Cluster {
    Cluster::start().unwrap_or_else(|e| panic!("starting a throwaway PostgreSQL server: {e}"))
}

pub(crate) fn database(c: &Cluster) -> String {
    c.create_database()
        .unwrap_or_else(|e| panic!("creating a database: {e}"))
}

#[test]
fn postgres_store_conforms() {
    let c = cluster();
    conformance(&PgKv::open(&database(&c)).expect("open"));
}

#[test]
fn postgres_and_memory_indexers_agree_and_postgres_resumes_after_reopen() {
    let c = cluster();
    let url = database(&c);
    agrees_with_memory_across_reopen(|| PgKv::open(&url).expect("open"));
}

#[test]
fn rollback_equals_replay_on_postgres() {
    let c = cluster();
    let mut runner = TestRunner::new(Config {
        cases: 12,
        ..Config::default()
    });
    runner
        .run(&ops(), |ops| {
            let (watch, _) = scenario();
            let store = PgKv::open(&database(&c)).expect("open");
            rollback_equals_replay_on(&Indexer::new(store, watch.clone(), 10), ops)
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn one_writer_many_readers() {
    let c = cluster();
    let url = database(&c);
    let (watch, blocks) = scenario();
    let writer = Indexer::new(PgKv::open(&url).expect("writer"), watch.clone(), 10);
    let second = PgKv::open_writer(&url, Duration::from_millis(300));
    assert!(
        matches!(second, Err(Error::WriterLocked)),
        "a second follower is refused: {second:?}"
    );
    let readers: Vec<_> = (0..2)
        .map(|_| Indexer::reader(PgKv::open_reader(&url).expect("reader"), watch.clone(), 10))
        .collect();
    for (i, b) in blocks.iter().enumerate() {
        writer.apply_block(b).expect("applies");
        if i % 5 == 0 || i + 1 == blocks.len() {
            for r in &readers {
                assert_eq!(
                    r.tip().expect("tip"),
                    writer.tip().expect("tip"),
                    "a reader sees each commit at once"
                );
            }
        }
    }
    let previous = replay(watch, &blocks[..blocks.len() - 1], 10)
        .tip()
        .expect("tip")
        .expect("some");
    let refused = readers[0].roll_back_to(Some((previous.slot, previous.hash)));
    assert!(matches!(refused, Err(Error::ReadOnly)), "{refused:?}");
    assert_eq!(all(&readers[0]), all(&writer));
    assert_eq!(all(&readers[1]), all(&replay(watch, blocks, 10)));
    drop(writer);
    PgKv::open_writer(&url, Duration::ZERO).expect("the lock is free once the writer is dropped");
}

/// The typed tables are the indexer's answers in SQL: per provider, the payments table sums to
/// its earnings and the slashes table to what it lost; the jobs table's statuses, the events
/// table's count and the claims agree; a rollback to the start empties every table, derived
/// ones included.
#[test]
fn typed_tables_agree_with_the_indexer_and_roll_back_with_it() {
    let c = cluster();
    let url = database(&c);
    let r = run();
    let ix = Indexer::new(PgKv::open(&url).expect("open"), r.watch.clone(), 1_000);
    for b in &r.blocks {
        ix.apply_block(b).expect("applies");
    }
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let num = |sql: &mut postgres::Client, q: &str, key: &[u8]| -> u64 {
        let row = sql.query_one(q, &[&key]).expect("query");
        row.get::<_, String>(0).parse().expect("a number")
    };
    let providers: Vec<[u8; 28]> = r.harness.providers.iter().map(|p| p.party.hash).collect();
    assert!(!providers.is_empty());
    let mut slashed_somewhere = false;
    for p in &providers {
        let summary = ix.provider(p).expect("provider");
        let paid = num(
            &mut sql,
            "SELECT coalesce(sum(ntx), 0)::text FROM payments WHERE payee = $1 AND kind = 'pay'",
            p,
        );
        assert_eq!(paid, summary.earnings, "earnings of {}", hex::encode(p));
        let slashed = num(
            &mut sql,
            "SELECT coalesce(sum(amount), 0)::text FROM slashes WHERE provider = $1",
            p,
        );
        assert_eq!(slashed, summary.slashed, "slashes of {}", hex::encode(p));
        slashed_somewhere |= slashed > 0;
        let jobs: i64 = sql
            .query_one(
                "SELECT count(*) FROM assignments WHERE provider = $1",
                &[&p.as_slice()],
            )
            .expect("query")
            .get(0);
        assert_eq!(jobs as usize, summary.jobs.len());
    }
    assert!(slashed_somewhere, "the scenario slashes defaulters");

    // A provider's payment history: the payments index (SQL) answers exactly what reading
    // the provider's jobs answers, page by page.
    let spec = replay(&r.watch, &r.blocks, 1_000);
    let mut paid_somewhere = false;
    for p in &providers {
        let indexed = ix.payments_to(p, 0, 100).expect("payments");
        assert_eq!(indexed, spec.payments_to(p, 0, 100).expect("payments"));
        assert_eq!(
            indexed.iter().map(|x| x.ntx).sum::<u64>(),
            ix.provider(p).expect("provider").earnings
        );
        paid_somewhere |= indexed.len() >= 2;
        assert_eq!(
            ix.payments_to(p, 1, 1).expect("page"),
            indexed.iter().skip(1).take(1).cloned().collect::<Vec<_>>()
        );
        assert!(
            indexed
                .windows(2)
                .all(|w| (w[0].slot, w[0].tx_index) >= (w[1].slot, w[1].tx_index)),
            "newest first"
        );
    }
    assert!(paid_somewhere, "a provider paid by two claims");

    // Pages of jobs: the jobs table's index pages exactly as reading every view does.
    for (status, skip, take, desc) in [
        (None, 0, 100, false),
        (None, 1, 2, true),
        (Some(JobStatus::Claimed), 0, 10, false),
        (Some(JobStatus::Expired), 0, 10, true),
        (Some(JobStatus::Locked), 0, 10, false),
        (None, 1_000_000, 10, false),
    ] {
        let page = ix.jobs_page(status, skip, take, desc).expect("page");
        assert_eq!(
            page,
            spec.jobs_page(status, skip, take, desc).expect("page"),
            "{status:?} {skip} {take} {desc}"
        );
    }
    assert_eq!(ix.jobs_page(None, 0, 100, false).expect("page").len(), 3);
    let events: i64 = sql
        .query_one("SELECT count(*) FROM events", &[])
        .expect("query")
        .get(0);
    assert_eq!(
        events as usize,
        ix.events(0, u64::MAX).expect("events").len()
    );
    for status in ["claimed", "expired", "cancelled"] {
        let n: i64 = sql
            .query_one("SELECT count(*) FROM jobs WHERE status = $1", &[&status])
            .expect("query")
            .get(0);
        assert!(n >= 1, "a {status} job in the scenario");
    }
    let claimed = ix.job(&r.claimed, 0).expect("job").expect("known").value;
    let claims: i64 = sql
        .query_one(
            "SELECT count(*) FROM claims WHERE job_id = $1",
            &[&r.claimed.0.as_slice()],
        )
        .expect("query")
        .get(0);
    assert_eq!(claims as usize, claimed.claims.iter().flatten().count());

    ix.roll_back_to(None).expect("back to the start");
    for table in [
        "chain_cursor",
        "undo_log",
        "script_utxos",
        "events",
        "claims",
        "receipts",
        "payments",
        "slashes",
        "jobs",
        "jobs_by_orchestrator",
        "assignments",
    ] {
        let n: i64 = sql
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .expect("query")
            .get(0);
        assert_eq!(n, 0, "{table} is empty after rolling everything back");
    }
}
