//! Fee and ExUnits table for every action (`cargo run -p ganglion-contracts --example fees
//! --features test-utils --release`).
//!
//! Every row is a real transaction: built, balanced (scripts run in uplc, fee at its exact
//! minimum for mainnet parameters) and applied through the devnet's ledger
//! (`ganglion_testnet::ledger::validate`). Columns: ExUnits as a
//! share of the per-transaction maximum (16.5 M mem, 10 G steps) and in units, size in bytes
//! once signed, fee in ADA. The targets (below) are checked at the end; the command exits non-zero
//! when one is missed.
//!
//! The table: post bond, lock, assign of 1/2/4/8 providers, claims, cancel, expire with one
//! slash, unbond, withdraw, rescales (adding, releasing, both) and a claim of a provider a
//! rescale added; then the targets: a 2-provider job lock → last claim ≤ 1.5 ADA,
//! one claim ≤ 40 % of the per-transaction ExUnits, and the most providers one assign can
//! carry (n = 1, 2, … until balancing fails).

use ganglion_contracts::test_utils::NTX;
use ganglion_contracts::test_utils::harness_v2 as v2h;
use ganglion_contracts::tx::Balanced;
use ganglion_contracts::v2::build as v2b;

struct Row {
    action: String,
    balanced: Balanced,
}

fn row(rows: &mut Vec<Row>, action: impl Into<String>, balanced: Balanced) -> u64 {
    let fee = balanced.fee;
    rows.push(Row {
        action: action.into(),
        balanced,
    });
    fee
}

/// Mean time to run every script of a balanced transaction in uplc (phase 2), the bulk of
/// what a node spends validating it.
fn eval_time(
    h: &v2h::Harness,
    b: &Balanced,
    payer: &ed25519_dalek::SigningKey,
) -> std::time::Duration {
    let signed = ganglion_contracts::tx::sign(b, &[payer]).expect("sign");
    let resolved = b.resolved();
    let rounds = 50u32;
    let start = std::time::Instant::now();
    for _ in 0..rounds {
        ganglion_contracts::eval::evaluate(
            &signed,
            &resolved,
            &h.env().params,
            &h.env().slot_config,
        )
        .expect("evaluates");
    }
    start.elapsed() / rounds
}

fn table(rows: &[Row], max: ganglion_contracts::protocol::ExUnits) {
    println!(
        "| action | mem (% of {:.1} M) | steps (% of {} G) | mem | steps | size (bytes) | fee (ADA) |",
        max.mem as f64 / 1e6,
        max.steps / 1_000_000_000
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let ex = r.balanced.total_ex_units();
        println!(
            "| {} | {:.2} % | {:.2} % | {} | {} | {} | {:.6} |",
            r.action,
            100.0 * ex.mem as f64 / max.mem as f64,
            100.0 * ex.steps as f64 / max.steps as f64,
            ex.mem,
            ex.steps,
            r.balanced.size,
            r.balanced.fee as f64 / 1e6
        );
    }
    println!();
}

/// The larger of a transaction's mem and steps shares of the per-transaction maximum.
fn share(b: &Balanced, max: ganglion_contracts::protocol::ExUnits) -> f64 {
    let ex = b.total_ex_units();
    (ex.mem as f64 / max.mem as f64).max(ex.steps as f64 / max.steps as f64)
}

/// One v2 job of `n` providers: lock, assign, every provider claims an hour (with a
/// receipt); rows for the assign and the claims. Returns the fees lock → last claim and
/// the largest claim share of the maximum ExUnits.
fn v2_job(rows: &mut Vec<Row>, n: usize) -> (u64, f64) {
    let mut h = v2h::Harness::new(n);
    let bonds = h.post_bonds();
    if n == 1 {
        row(rows, "post bond", bonds[0].clone());
    }
    let (mut job, lock) = h.lock(1_000 * NTX, 7200);
    let max = h.env().params.max_tx_ex_units;
    let mut total = lock.fee;
    if n == 2 {
        row(rows, "lock", lock);
    }
    let assign = h.assign(&mut job);
    total += row(rows, format!("assign, {n} provider(s)"), assign);
    h.world.slot += 3600;
    let now = h.world.now_ms();
    let mut worst: f64 = 0.0;
    for i in 0..n {
        let gpu_ms = h.providers[i].gpus * 3_600_000;
        let b = h
            .claim(&mut job, i, gpu_ms, Some(now))
            .expect("claim applies");
        worst = worst.max(share(&b, max));
        total += b.fee;
        let what = if i + 1 == n {
            format!("claim, last of {n}")
        } else {
            format!("claim, middle ({} of {n})", i + 1)
        };
        if i + 1 == n {
            let payer = h.providers[i].party.key.clone();
            println!(
                "phase-2 evaluation of the last claim of {n}: {:.2} ms (one slot = 1000 ms)",
                eval_time(&h, &b, &payer).as_secs_f64() * 1e3
            );
        }
        if i + 1 == n || i == 0 {
            row(rows, what, b);
        }
    }
    (total, worst)
}

/// The table and targets. Returns false when a target is missed.
fn v2() -> bool {
    println!("## escrow protocol v2 (`ganglion_v2`)");
    let mut rows = Vec::new();
    let mut costs = Vec::new();
    let mut worst_claim: f64 = 0.0;
    for n in [1, 2, 4, 8] {
        let (cost, worst) = v2_job(&mut rows, n);
        costs.push((n, cost));
        worst_claim = worst_claim.max(worst);
    }

    // cancel, expire with one slash, unbond, withdraw
    let mut h = v2h::Harness::new(2);
    h.post_bonds();
    let (job, _) = h.lock(100 * NTX, 600);
    let cancel = h.cancel(&job).expect("cancel");
    row(&mut rows, "cancel", cancel);
    let (mut job, _) = h.lock(100 * NTX, 600);
    h.assign(&mut job);
    h.world.slot += 300;
    let now = h.world.now_ms();
    h.claim(&mut job, 0, 2 * 300_000, Some(now)).expect("claim");
    h.world.slot = job.claim_end_slot() + 1;
    let (expire, _) = h.expire(&job, &[1]).expect("expire");
    row(
        &mut rows,
        "expire, 2 providers (1 claimed, 1 slashed)",
        expire,
    );
    let p = h.providers[0].party.clone();
    let bond = h.providers[0].bond.clone().expect("bond");
    let until = h.world.slot + 60;
    let unbond = h
        .run(
            v2b::unbond(&h.dep, h.env(), &bond, h.world.slot, until).expect("unbond"),
            &p,
            &[],
        )
        .expect("unbond");
    let unbonding = h.output(&unbond, 0);
    row(&mut rows, "unbond", unbond);
    let ready = until + h.dep.params.unbonding_delay_ms / 1000;
    h.world.slot = ready;
    let withdraw = h
        .run(
            v2b::withdraw(&h.dep, h.env(), &unbonding, ready).expect("withdraw"),
            &p,
            &[],
        )
        .expect("withdraw");
    row(&mut rows, "withdraw", withdraw);

    rescale_rows(&mut rows);

    let max = h.env().params.max_tx_ex_units;
    println!(
        "script: {} bytes (reference script)",
        h.dep.script.bytes.len()
    );
    table(&rows, max);

    let mut ok = true;
    for (n, cost) in &costs {
        println!(
            "v2 job, {n} provider(s), lock → last claim: {:.6} ADA in fees",
            *cost as f64 / 1e6
        );
    }
    let two = costs
        .iter()
        .find(|(n, _)| *n == 2)
        .map_or(u64::MAX, |(_, c)| *c);
    if two > 1_500_000 {
        println!("TARGET MISSED: the 2-provider v2 job costs more than 1.5 ADA lock → last claim");
        ok = false;
    }
    println!(
        "largest v2 claim (jobs of 1 to 8 providers): {:.1} % of the per-transaction ExUnits",
        100.0 * worst_claim
    );
    if worst_claim > 0.4 {
        println!("TARGET MISSED: a v2 claim uses more than 40 % of the maximum ExUnits");
        ok = false;
    }
    let (most, why) = max_assign();
    println!(
        "largest v2 assign: {most} providers in one transaction ({most_plus_one} fails: {why})",
        most_plus_one = most + 1
    );
    ok
}

/// A service of two replicas of 2 GPUs (an escrow of 4 GPUs) assigned to one provider; a
/// rescale adds a second, another adds a third while releasing the first, a third releases
/// the second alone; then the added provider's claim.
fn rescale_rows(rows: &mut Vec<Row>) {
    let mut h = v2h::Harness::new(3);
    h.post_bonds();
    let (mut job, _) = h
        .lock_with(4, 100 * NTX, 7200, v2h::RECEIPT_INTERVAL_MS)
        .expect("lock");
    let req = h.assign_request_for(&job, &[0]);
    h.assign_with(&mut job, &req).expect("assign");
    h.world.slot += 600;
    let req = h.rescale_request(&job, &[1], &[]);
    let b = h.rescale_with(&mut job, &req).expect("rescale");
    row(rows, "rescale, adding 1 provider", b);
    h.world.slot += 600;
    let until = h.release_notice_ms(&job, h.world.slot + v2h::RESCALE_SLOTS);
    let req = h.rescale_request(&job, &[2], &[(0, until)]);
    let b = h.rescale_with(&mut job, &req).expect("rescale");
    row(rows, "rescale, adding 1 provider and releasing 1", b);
    h.world.slot += 600;
    let until = h.release_notice_ms(&job, h.world.slot + v2h::RESCALE_SLOTS);
    let req = h.rescale_request(&job, &[], &[(1, until)]);
    let b = h.rescale_with(&mut job, &req).expect("rescale");
    row(rows, "rescale, releasing 1 (of 3)", b);
    h.world.slot += 600;
    let now = h.world.now_ms();
    let b = h
        .claim_as(&mut job, 2, 2, 2 * 600_000, Some(now))
        .expect("claim");
    row(
        rows,
        "claim, middle (a provider added by a rescale, 1 of 3)",
        b,
    );
}

/// The most providers one v2 assign can carry: n = 1, 2, … until balancing fails (ExUnits
/// or size). Returns that n and why n + 1 failed.
fn max_assign() -> (usize, String) {
    const CAP: usize = 80;
    let mut h = v2h::Harness::new(CAP);
    h.post_bonds();
    for n in 1..=CAP {
        let (job, _) = h
            .lock_with(2 * n as u64, 1_000 * NTX, 7200, v2h::RECEIPT_INTERVAL_MS)
            .expect("lock");
        let all: Vec<usize> = (0..n).collect();
        let req = h.assign_request_for(&job, &all);
        let draft = v2b::assign(&h.dep, h.env(), &req).expect("assign draft");
        let orch = h.orch.clone();
        match h.balance(draft, &orch) {
            Ok(b) => {
                let max = h.env().params.max_tx_ex_units;
                let ex = b.total_ex_units();
                println!(
                    "  assign of {n}: {:.1} % mem, {:.1} % steps, {} bytes",
                    100.0 * ex.mem as f64 / max.mem as f64,
                    100.0 * ex.steps as f64 / max.steps as f64,
                    b.size
                );
                h.cancel(&job).expect("cancel");
            }
            Err(e) => {
                let why = match &e {
                    ganglion_contracts::Error::ScriptFailed { reason, .. }
                        if reason.contains("over budget") =>
                    {
                        format!(
                            "ExUnits: the script runs over the per-transaction maximum ({})",
                            reason.split_whitespace().collect::<Vec<_>>().join(" ")
                        )
                    }
                    other => other.to_string(),
                };
                return (n - 1, why);
            }
        }
    }
    (CAP, format!("not reached, {CAP} tried"))
}

fn main() {
    if !v2() {
        std::process::exit(1);
    }
}
