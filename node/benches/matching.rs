//! Matcher throughput and latency on synthetic heterogeneous markets (100 / 1 000 / 10 000
//! providers, about 7 GPUs each) with a 1/2/4/8/16/32-GPU job mix.
//!
//! `cargo bench -p ganglion-node --bench matching`. Besides criterion's per-iteration time, it
//! prints for each size: decisions/s on one core over the whole mix, p50/p99 latency of single
//! decisions, and how many decisions found a plan.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ganglion_node::market::synthetic::{self, Rng};
use ganglion_node::market::{MarketSnapshot, Requirements, SnapshotOptions, match_gang};

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
    let start = Instant::now();
    for _ in 0..5 {
        for job in jobs {
            let t = Instant::now();
            let r = black_box(match_gang(black_box(job), snap));
            let dt = t.elapsed();
            lat.push(dt);
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
