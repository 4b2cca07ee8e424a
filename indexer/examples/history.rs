//! A large history on PostgreSQL and the read API's latency over it
//! (`cargo run -p ganglion-indexer --example history --release [-- JOBS]`, default 1 000 000).
//!
//! The template is one real job: locked, assigned to four providers and claimed by each
//! (transactions built by `ganglion-contracts`, judged by uplc, in devnet-assembled blocks),
//! indexed block by block into a throwaway PostgreSQL server (`ganglion_testnet::postgres`).
//! SQL then clones it JOBS times — its job view, events, claims, receipts, payments and
//! indexes, each clone with its own job id and event keys, its pay spread over 1 000 providers.
//! A `serve`-style reader ([`ganglion_indexer::http::serve`] over a read-only store) answers on
//! loopback; printed: the time to build the history, p50/p99 of `GET /jobs/{id}` (random jobs)
//! and of `GET /providers/{key}/payments?count=100` (random providers), and the database size
//! per job (about 25 kB: a million jobs need about 25 GB of disk). Goal: p99 ≤ 10 ms for both.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ganglion_contracts::test_utils::NTX;
use ganglion_contracts::test_utils::harness_v2::Harness;
use ganglion_indexer::store::PgKv;
use ganglion_indexer::{Indexer, Watch};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Providers the synthetic payments are spread over.
const PROVIDERS: i64 = 1_000;
/// Requests per measured route.
const SAMPLES: usize = 2_000;

/// The synthetic key hash (28 bytes) of provider `n`, as SQL computes it.
fn provider_key(n: i64) -> [u8; 28] {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("provider-{n}").as_bytes());
    let mut key = [0u8; 28];
    key.copy_from_slice(&digest[..28]);
    key
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The SQL that clones the template job (`$1`: its id, `$2`: how many; both substituted as
/// literals) into jobs `1..=$2`: the clone's id is
/// `sha256(int8send(i))`, its events take slots `10 000 000 + 10·i + n` (n: the template
/// event's rank), its payments go to provider `i % 1000`.
const CLONE: &str = r#"
CREATE TEMP TABLE tmpl_events AS
  SELECT e.*, row_number() OVER (ORDER BY e.k) AS n FROM events e WHERE e.job_id = $1;
CREATE TEMP TABLE clones AS
  SELECT g.i, sha256(int8send(g.i)) AS id FROM generate_series(1, $2) AS g(i);
INSERT INTO jobs (k, body, job_id, orchestrator, status, gpus, budget, last_height)
  SELECT convert_to('j/' || encode(c.id, 'hex'), 'UTF8'),
         replace(t.body::text, encode($1, 'hex'), encode(c.id, 'hex'))::json,
         c.id, t.orchestrator, t.status, t.gpus, t.budget, t.last_height
  FROM clones c, jobs t WHERE t.job_id = $1;
INSERT INTO jobs_by_orchestrator (k, body, orchestrator, job_id)
  SELECT convert_to('o/' || encode(t.orchestrator, 'hex') || '/' || encode(c.id, 'hex'), 'UTF8'),
         '', t.orchestrator, c.id
  FROM clones c, jobs t WHERE t.job_id = $1;
INSERT INTO events (k, body, slot, height, block, tx_hash, tx_index, seq, kind, job_id, provider)
  SELECT convert_to('e/' || lpad((10000000 + 10 * c.i + t.n)::text, 20, '0') || '/'
                    || lpad(t.tx_index::text, 10, '0') || '/' || lpad(t.seq::text, 5, '0'), 'UTF8'),
         replace(t.body::text, encode($1, 'hex'), encode(c.id, 'hex'))::json,
         10000000 + 10 * c.i + t.n, t.height, t.block, sha256(c.id || t.tx_hash), t.tx_index,
         t.seq, t.kind, c.id, t.provider
  FROM clones c, tmpl_events t;
INSERT INTO payments (event_k, seq, job_id, kind, payee, ntx, slot, tx_hash)
  SELECT convert_to('e/' || lpad((10000000 + 10 * c.i + t.n)::text, 20, '0') || '/'
                    || lpad(t.tx_index::text, 10, '0') || '/' || lpad(t.seq::text, 5, '0'), 'UTF8'),
         p.seq, c.id, p.kind,
         CASE WHEN p.payee IS NULL THEN NULL
              ELSE substring(sha256(convert_to('provider-' || ((c.i * 4 + p.seq + t.n) % 1000)::text, 'UTF8')) FROM 1 FOR 28) END,
         p.ntx, 10000000 + 10 * c.i + t.n, sha256(c.id || t.tx_hash)
  FROM clones c, tmpl_events t JOIN payments p ON p.event_k = t.k;
INSERT INTO claims (event_k, job_id, provider, idx, slot, tx_hash, gpu_ms, paid, closed)
  SELECT convert_to('e/' || lpad((10000000 + 10 * c.i + t.n)::text, 20, '0') || '/'
                    || lpad(t.tx_index::text, 10, '0') || '/' || lpad(t.seq::text, 5, '0'), 'UTF8'),
         c.id, cl.provider, cl.idx, 10000000 + 10 * c.i + t.n, sha256(c.id || t.tx_hash),
         cl.gpu_ms, cl.paid, cl.closed
  FROM clones c, tmpl_events t JOIN claims cl ON cl.event_k = t.k;
INSERT INTO receipts (event_k, job_id, provider, slot, receipt)
  SELECT convert_to('e/' || lpad((10000000 + 10 * c.i + t.n)::text, 20, '0') || '/'
                    || lpad(t.tx_index::text, 10, '0') || '/' || lpad(t.seq::text, 5, '0'), 'UTF8'),
         c.id, r.provider, 10000000 + 10 * c.i + t.n, r.receipt
  FROM clones c, tmpl_events t JOIN receipts r ON r.event_k = t.k;
ANALYZE;
"#;

async fn get(client: &HttpClient, url: &str) -> (u16, usize) {
    let res = client
        .get(url.parse().expect("uri"))
        .await
        .expect("an answer");
    let status = res.status().as_u16();
    let body = res.into_body().collect().await.expect("body").to_bytes();
    (status, body.len())
}

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>;

/// Requests each of `paths` once in turn; prints p50/p99 and returns p99.
async fn measure(
    client: &HttpClient,
    addr: std::net::SocketAddr,
    name: &str,
    paths: &[String],
) -> Duration {
    let mut times = Vec::with_capacity(paths.len());
    let mut bytes = 0;
    for path in paths {
        let url = format!("http://{addr}{path}");
        let t = Instant::now();
        let (status, len) = get(client, &url).await;
        times.push(t.elapsed());
        assert_eq!(status, 200, "{url}");
        bytes += len;
    }
    times.sort();
    let (p50, p99) = (percentile(&times, 0.5), percentile(&times, 0.99));
    println!(
        "{name}: p50 {:.2} ms, p99 {:.2} ms ({} requests, {} bytes each on average)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        paths.len(),
        bytes / paths.len().max(1)
    );
    p99
}

#[tokio::main]
async fn main() {
    let jobs: i64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("JOBS: a number"))
        .unwrap_or(1_000_000);
    let cluster = match ganglion_testnet::postgres::Cluster::start() {
        Ok(c) => c,
        Err(e) => {
            println!("SKIPPED: no PostgreSQL server to measure on ({e})");
            return;
        }
    };
    let url = cluster.create_database().expect("createdb");

    // The template: one real job, claimed by four providers.
    let mut h = Harness::new(4);
    h.post_bonds_for(1);
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut job);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    for i in 0..4 {
        h.claim(&mut job, i, 2 * 3_600_000, Some(now))
            .expect("claim");
    }
    let blocks = ganglion_testnet::producer::chain_of(&h.world.applied).expect("blocks");
    let watch = Watch::v2(h.dep.script.hash, h.dep.params.clone());
    {
        let ix = Indexer::new(PgKv::open(&url).expect("store"), watch.clone(), 2160);
        for b in &blocks {
            ix.apply_block(b).expect("applies");
        }
        ix.flush().expect("flush");
    }

    let start = Instant::now();
    let sql_url = url.clone();
    let script = CLONE
        .replace("$1", &format!("decode('{}', 'hex')", hex::encode(job.id.0)))
        .replace("$2", &jobs.to_string());
    tokio::task::spawn_blocking(move || {
        let mut sql = postgres::Client::connect(&sql_url, postgres::NoTls).expect("connect");
        // One simple-protocol batch: one implicit transaction.
        sql.batch_execute(&script).expect("the history is built");
    })
    .await
    .expect("join");
    let built = start.elapsed();

    let ix = Arc::new(Indexer::reader(
        PgKv::open_reader(&url).expect("reader"),
        watch,
        2160,
    ));
    let size_sql = url.clone();
    let (db_bytes, job_rows): (i64, i64) = tokio::task::spawn_blocking(move || {
        let mut sql = postgres::Client::connect(&size_sql, postgres::NoTls).expect("connect");
        let row = sql
            .query_one(
                "SELECT pg_database_size(current_database()), (SELECT count(*) FROM jobs)",
                &[],
            )
            .expect("size");
        (row.get(0), row.get(1))
    })
    .await
    .expect("join");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(ganglion_indexer::http::serve(listener, ix, stop.clone()));
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();

    // Random jobs and providers (an LCG: reproducible).
    let mut state: u64 = 7;
    let mut next = move |n: i64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as i64 % n
    };
    let job_paths: Vec<String> = (0..SAMPLES)
        .map(|_| {
            use sha2::Digest;
            let id = sha2::Sha256::digest((1 + next(jobs)).to_be_bytes());
            format!("/jobs/{}", hex::encode(id))
        })
        .collect();
    let payment_paths: Vec<String> = (0..SAMPLES)
        .map(|_| {
            let key = hex::encode(provider_key(next(PROVIDERS)));
            format!("/providers/{key}/payments?count=100")
        })
        .collect();
    let job_p99 = measure(&client, addr, "GET /jobs/{id}", &job_paths).await;
    let pay_p99 = measure(
        &client,
        addr,
        "GET /providers/{key}/payments?count=100",
        &payment_paths,
    )
    .await;
    stop.cancel();
    println!(
        "history: {job_rows} jobs built in {:.1} s; database {:.1} MiB, {:.0} bytes per job",
        built.as_secs_f64(),
        db_bytes as f64 / (1 << 20) as f64,
        db_bytes as f64 / job_rows as f64
    );
    let goal = Duration::from_millis(10);
    if job_p99 > goal || pay_p99 > goal {
        println!("TARGET MISSED: a p99 above 10 ms");
        std::process::exit(1);
    }
}
