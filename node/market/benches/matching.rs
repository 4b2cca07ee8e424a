//! Matcher throughput and latency on synthetic heterogeneous markets (100 / 1 000 / 10 000
//! providers, about 7 GPUs each; measured pair throughputs between sites, half the offers
//! benchmarked) with a 1/2/4/8/16/32-GPU job mix, every job with an RTT bound of 5–200 ms and
//! a few 8- and 16-GPU jobs in latency groups of 4 ([`synthetic::job`]).
//!
//! `cargo bench -p ganglion-market --bench matching` (quick: add `-- --warm-up-time 1
//! --measurement-time 3`). Besides criterion's per-iteration time, it prints for each size:
//! decisions/s on one core over the whole mix, p50/p99 latency of single decisions, and how many
//! decisions found a plan. Targets at 10 000 providers: ≥ 50 000 decisions/s, p99 ≤ 1 ms.

// `criterion_group!` generates an undocumented `pub fn benches`.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ganglion_market::synthetic::{self, Rng};
use ganglion_market::{MarketSnapshot, NoFit, Plan, Requirements, SnapshotOptions, match_gang};

const JOBS: usize = 2_000;

fn setup(n: u32) -> (MarketSnapshot, Vec<Requirements>) {
    let (offers, rtts) = synthetic::market(n, 7);
    let snap = MarketSnapshot::build(&offers, &rtts, SnapshotOptions::default())
        .expect("synthetic market has distinct providers");
    let mut rng = Rng::new(11);
    let jobs = (0..JOBS).map(|_| synthetic::job(&mut rng)).collect();
    (snap, jobs)
}

fn report(n: u32, snap: &MarketSnapshot, jobs: &[Requirements]) {
    let mut lat: Vec<Duration> = Vec::with_capacity(jobs.len() * 5);
    let mut by_count: std::collections::BTreeMap<u32, (Vec<Duration>, usize)> = Default::default();
    let mut fits = 0usize;
    let mut digest = 0xcbf2_9ce4_8422_2325u64;
    let start = Instant::now();
    for _ in 0..5 {
        for job in jobs {
            let t = Instant::now();
            let r = black_box(match_gang(black_box(job), snap));
            let dt = t.elapsed();
            lat.push(dt);
            digest = fold_plan(digest, &r);
            fits += usize::from(r.is_ok());
            let e = by_count.entry(job.count).or_default();
            e.0.push(dt);
            e.1 += usize::from(r.is_ok());
        }
    }
    let total = start.elapsed();
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() as f64 - 1.0) * p) as usize];
    println!(
        "matching/{n} providers ({} GPUs free): {:.0} decisions/s, p50 {:?}, p99 {:?}, max {:?}, {}/{} fit",
        snap_free(snap),
        lat.len() as f64 / total.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        lat[lat.len() - 1],
        fits,
        lat.len()
    );
    println!("  plan digest {digest:016x} (equal digests = identical plans and no-fit reports)");
    no_fit_pass(snap, jobs);
    for (count, (mut l, fit)) in by_count {
        l.sort_unstable();
        let mean = l.iter().sum::<Duration>() / l.len() as u32;
        println!(
            "  {count:>2}-GPU gangs: mean {mean:?}, p50 {:?}, p99 {:?}, {fit}/{} fit",
            l[l.len() / 2],
            l[(l.len() - 1) * 99 / 100],
            l.len()
        );
    }
}

/// Decisions that end in a no-fit report (which scans the whole market to charge every free GPU
/// to a constraint): each job of the mix asked as 64 GPUs on one machine, which no synthetic
/// provider has.
fn no_fit_pass(snap: &MarketSnapshot, jobs: &[Requirements]) {
    let mut lat: Vec<Duration> = Vec::with_capacity(jobs.len());
    let mut no_fits = 0usize;
    for job in jobs {
        let mut job = job.clone();
        job.count = 64;
        job.max_nodes = 1;
        job.min_gpus_per_node = job.min_gpus_per_node.min(64);
        let t = Instant::now();
        let r = black_box(match_gang(black_box(&job), snap));
        lat.push(t.elapsed());
        no_fits += usize::from(r.is_err());
    }
    lat.sort_unstable();
    println!(
        "  no-fit decisions: p50 {:?}, p99 {:?}, max {:?} ({no_fits}/{} no-fit)",
        lat[lat.len() / 2],
        lat[(lat.len() - 1) * 99 / 100],
        lat[lat.len() - 1],
        lat.len()
    );
}

/// FNV-1a over every plan's nodes (rank, GPUs) and every no-fit report's counts: a change in
/// any decision changes the digest, so two matcher versions can be compared on the whole mix.
fn fold_plan(mut h: u64, r: &Result<Plan, NoFit>) -> u64 {
    let mut eat = |x: u64| {
        for b in x.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    match r {
        Ok(plan) => {
            for n in &plan.nodes {
                eat(u64::from(n.rank) << 32 | u64::from(n.gpus));
                eat(n.group.map_or(u64::MAX, u64::from));
            }
            eat(u64::from(plan.exhaustive));
        }
        Err(nf) => {
            eat(u64::MAX);
            eat(nf.eligible_gpus);
            for e in &nf.excluded {
                eat(e.gpus);
            }
        }
    }
    h
}

fn snap_free(snap: &MarketSnapshot) -> u64 {
    snap.free_gpus()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("matching");
    for n in [100u32, 1_000, 10_000] {
        let (snap, jobs) = setup(n);
        report(n, &snap, &jobs);
        group.bench_with_input(BenchmarkId::new("job_mix", n), &n, |b, _| {
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) % jobs.len();
                black_box(match_gang(&jobs[i], &snap)).is_ok()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
