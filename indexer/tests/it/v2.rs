//! Protocol v2 through the indexer: real transactions built by `ganglion_contracts::v2` and
//! accepted by the devnet's ledger (`harness_v2`), wrapped in blocks. Job A is assigned to
//! two providers who both claim (the second claim closes the escrow); job B is assigned to
//! the same two, provider 0 claims and provider 1 defaults: the expire slashes it. Every
//! amount the indexer reports is read from the chain's outputs and compared with what
//! `ganglion_contracts::v2::rules` computes from the inputs the test chose.

use std::sync::OnceLock;

use ganglion_contracts::test_utils::harness_v2::{
    CLAIM_WINDOW_MS, Harness, RATE, RECEIPT_INTERVAL_MS,
};
use ganglion_contracts::test_utils::{NTX, ntx};
use ganglion_contracts::tx::{Draft, Output, TxoRef, Value};
use ganglion_contracts::v2::datum::{Assignment, GanglionDatum, JobId, JobState};
use ganglion_contracts::v2::rules::{pay_for, slash_of, split_slashes};
use ganglion_indexer::store::{Kv, MemoryKv};
use ganglion_indexer::{
    ClaimOutcome, Event, Indexer, JobStatus, JobView, Payment, ReceiptTerms, Slash, Watch,
};

use crate::scenario::blocks_of;

/// Job A's GPU time per provider, chosen so that the pay is floored (not a multiple of
/// 3 600 000 / rate).
const A0_GPU_MS: u64 = 2 * 3_600_000 - 1_234;
const A1_GPU_MS: u64 = 2 * 3_000_000 + 7;
/// Job B's claim by provider 0, without a receipt: within its bound of one receipt
/// interval on 2 GPUs, and floored.
const B0_GPU_MS: u64 = 2 * RECEIPT_INTERVAL_MS - 1;
const BUDGET: u64 = 1_000 * NTX;

/// The run's blocks and what the test needs to know about it.
struct Run {
    watch: Watch,
    blocks: Vec<Vec<u8>>,
    h: Harness,
    a: JobId,
    b: JobId,
    /// Block (index into `blocks`) of each step.
    claim_a0: usize,
    claim_a1: usize,
    expire_b: usize,
    /// Job A's deadline, job B's assignments and start, as the ledger holds them.
    a_deadline_ms: u64,
    b_assignments: Vec<Assignment>,
    b_started_ms: u64,
    b_deadline_ms: u64,
    /// Acknowledged times of the receipts job A's claims carried.
    a_receipts: (u64, u64),
    /// The expire's transaction id.
    expire_tx: [u8; 32],
    /// The harness builder's own account of the expire.
    expire_outcome: ganglion_contracts::v2::build::ExpireOutcome,
    /// Provider 1's bond before the expire, and its stake then.
    bond1_before: TxoRef,
    stake1: u64,
    /// The junk `Burnt` output.
    junk: TxoRef,
}

fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let mut h = Harness::new(2);
        h.post_bonds_for(2);

        // Job A: both providers claim.
        let (mut a, _) = h.lock(BUDGET, 7200);
        h.assign(&mut a);
        h.world.slot += 3600;
        let now = h.world.now_ms();
        h.claim(&mut a, 0, A0_GPU_MS, Some(now)).expect("claim a0");
        let claim_a0 = h.world.applied.len() - 1;
        h.world.slot += 60;
        let ack1 = now - 600_000;
        h.claim(&mut a, 1, A1_GPU_MS, Some(ack1)).expect("claim a1");
        let claim_a1 = h.world.applied.len() - 1;

        // Job B: provider 0 claims (without a receipt), provider 1 defaults.
        let (mut b, _) = h.lock(BUDGET, 7200);
        h.assign(&mut b);
        let b_started_ms = b.started_at_ms.expect("assigned");
        let JobState::Assigned { assignments, .. } = h.escrow_datum(&b).state else {
            panic!("job B is assigned")
        };
        h.world.slot += 3600;
        h.claim(&mut b, 0, B0_GPU_MS, None).expect("claim b0");
        let bond1 = h.providers[1].bond.clone().expect("bonded");
        h.world.slot = b.claim_end_slot() + 1;
        let (expire_tx, expire_outcome) = h.expire(&b, &[1]).expect("expire b");
        let expire_b = h.world.applied.len() - 1;

        // Junk: a `Burnt` datum at the script address outside any expire.
        let mut junk = Draft::default();
        junk.pay(
            Output::new(
                h.dep.address(h.env()),
                Value::lovelace(3_000_000).with_class(&ntx(), 5),
            )
            .with_datum(GanglionDatum::Burnt(a.id).to_plutus_data()),
        );
        let orch = h.orch.clone();
        let j = h.run(junk, &orch, &[]).expect("junk payment");

        Run {
            watch: Watch::v2(h.dep.script.hash, h.dep.params.clone()),
            blocks: blocks_of(&h.world.applied),
            a: a.id,
            b: b.id,
            claim_a0,
            claim_a1,
            expire_b,
            a_deadline_ms: a.deadline_ms,
            b_assignments: assignments,
            b_started_ms,
            b_deadline_ms: b.deadline_ms,
            a_receipts: (now, ack1),
            expire_tx: expire_tx.hash,
            expire_outcome,
            stake1: bond1.output.value.quantity_of(&ntx()),
            bond1_before: bond1.reference,
            junk: TxoRef {
                tx_hash: j.hash,
                index: 0,
            },
            h,
        }
    })
}

fn replay(r: &Run, n: usize) -> Indexer<MemoryKv> {
    let ix = Indexer::new(MemoryKv::new(), r.watch.clone(), 20);
    for b in &r.blocks[..n] {
        ix.apply_block(b).expect("block applies");
    }
    ix
}

fn view(ix: &Indexer<MemoryKv>, id: &JobId) -> JobView {
    ix.job(id, 0).expect("query").expect("job known").value
}

fn events(ix: &Indexer<MemoryKv>) -> Vec<Event> {
    ix.events(0, u64::MAX)
        .expect("events")
        .into_iter()
        .map(|r| r.event)
        .collect()
}

/// Job B's slash of provider 1 and its split, by the rules, from the ledger's datums.
fn b_split(r: &Run) -> (u64, u64, u64) {
    let paid = pay_for(B0_GPU_MS, RATE);
    let slash = slash_of(
        &r.b_assignments[1],
        r.stake1,
        r.b_started_ms,
        r.b_deadline_ms,
    );
    let (recovered, burnt) = split_slashes(slash, paid);
    (slash, recovered, burnt)
}

#[test]
fn bonds_and_locks_carry_the_v2_terms() {
    let r = run();
    let ix = replay(r, r.blocks.len());
    let all = events(&ix);
    let posted: Vec<_> = all
        .iter()
        .filter_map(|e| match e {
            Event::BondPosted {
                provider, payout, ..
            } => Some((*provider, *payout)),
            _ => None,
        })
        .collect();
    let want: Vec<_> =
        r.h.providers
            .iter()
            .map(|p| (p.party.hash, p.payout))
            .collect();
    assert_eq!(posted, want);
    assert!(
        r.h.providers[0].payout.stake.is_some(),
        "provider 0's payout carries a stake credential"
    );
    let a = view(&ix, &r.a);
    assert_eq!(
        a.receipts,
        ReceiptTerms {
            key: r.h.receipt.verifying_key().to_bytes(),
            interval_ms: RECEIPT_INTERVAL_MS,
        }
    );
    assert_eq!(a.claim_window_end_ms, r.a_deadline_ms + CLAIM_WINDOW_MS);
    assert!(matches!(
        a.history[0].event,
        Event::JobLocked {
            claim_window_ms: CLAIM_WINDOW_MS,
            ..
        }
    ));
    // The assignments as the ledger's datum holds them: payout addresses, accept-by.
    let b = view(&ix, &r.b);
    assert_eq!(b.assignments, r.b_assignments);
    assert_eq!(b.assignments[0].payout, r.h.providers[0].payout);
    assert!(
        b.assignments
            .iter()
            .all(|x| x.accept_by_ms > r.b_started_ms)
    );
}

#[test]
fn each_claim_pays_what_the_rules_compute_and_the_last_closes_the_escrow() {
    let r = run();
    let pay0 = pay_for(A0_GPU_MS, RATE);
    let pay1 = pay_for(A1_GPU_MS, RATE);
    assert!(
        u128::from(A0_GPU_MS) * u128::from(RATE) % 3_600_000 != 0,
        "the test's gpu_ms is floored"
    );

    // After provider 0's claim: claims in progress, provider 1's GPUs still busy.
    let ix = replay(r, r.claim_a0 + 1);
    let a = view(&ix, &r.a);
    assert_eq!(a.status, JobStatus::Claiming);
    assert_eq!(a.claims.len(), 2);
    let c0 = a.claims[0].expect("provider 0 claimed");
    assert_eq!(
        (c0.gpu_ms, c0.paid, c0.acknowledged_until_ms),
        (A0_GPU_MS, pay0, Some(r.a_receipts.0))
    );
    assert_eq!(a.claims[1], None);
    assert_eq!(
        a.payments,
        vec![Payment {
            to: r.h.providers[0].party.hash,
            ntx: pay0
        }]
    );
    let free = |p: usize, at_ms: u64| {
        ix.active_bonds_at(at_ms)
            .expect("bonds")
            .iter()
            .find(|b| b.datum.provider == r.h.providers[p].party.hash)
            .map(|b| (b.free_gpus, b.datum.gpus))
    };
    let end = a.claim_window_end_ms;
    // Provider 0's claim released its bond's commitment; provider 1's assignment holds its
    // GPUs until its claim, at the latest until deadline + claim window (G5).
    let (free_now, bonded) = free(0, r.a_receipts.0).expect("bond");
    assert_eq!(free_now, bonded, "the claim released provider 0's GPUs");
    let (free_now, bonded) = free(1, r.a_receipts.0).expect("bond");
    assert_eq!(
        free_now,
        bonded - r.h.providers[1].gpus,
        "provider 1 not claimed yet"
    );
    assert_eq!(free(1, end + 1), Some((bonded, bonded)), "then they free");

    // After provider 1's claim: fully claimed, the rest refunded.
    let ix = replay(r, r.claim_a1 + 1);
    let a = view(&ix, &r.a);
    assert_eq!(a.status, JobStatus::Claimed);
    let c1 = a.claims[1].expect("provider 1 claimed");
    assert_eq!(
        (c1.gpu_ms, c1.paid, c1.acknowledged_until_ms),
        (A1_GPU_MS, pay1, Some(r.a_receipts.1))
    );
    assert_eq!(a.paid(), pay0 + pay1);
    let claims: Vec<_> = a
        .history
        .iter()
        .filter_map(|rec| match &rec.event {
            Event::JobClaimed {
                index,
                provider,
                payout,
                paid,
                outcome,
                ..
            } => Some((
                *index,
                *provider,
                *payout,
                *paid,
                *outcome,
                rec.meta.tx_hash,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(claims.len(), 2);
    let p = &r.h.providers;
    assert_eq!(
        (claims[0].0, claims[0].1, claims[0].2, claims[0].3),
        (0, p[0].party.hash, p[0].payout, pay0)
    );
    assert_eq!(
        claims[0].4,
        ClaimOutcome::Continues {
            escrow: TxoRef {
                tx_hash: claims[0].5,
                index: 1
            }
        },
        "the escrow continues at outputs[1]"
    );
    assert_eq!(
        (claims[1].0, claims[1].1, claims[1].2, claims[1].3),
        (1, p[1].party.hash, p[1].payout, pay1)
    );
    assert_eq!(
        claims[1].4,
        ClaimOutcome::Closed {
            refund: BUDGET - pay0 - pay1
        }
    );
    assert!(
        ix.live_utxos().expect("utxos").iter().all(|t| t.reference
            != TxoRef {
                tx_hash: claims[0].5,
                index: 1
            }),
        "the closed escrow is no longer live"
    );
    // Provider 0's bond lives on as its claim continued it (outputs[2], the commitment
    // released).
    assert!(ix.live_utxos().expect("utxos").iter().any(|t| t.reference
        == TxoRef {
            tx_hash: claims[0].5,
            index: 2
        }
        && t.bond().is_some()));
    let after_window = ix
        .job(&r.a, 0)
        .expect("job")
        .map(|c| c.value.claim_window_end_ms)
        .expect("job")
        + 1;
    assert!(
        ix.active_bonds_at(after_window)
            .expect("bonds")
            .iter()
            .all(|b| b.free_gpus == b.datum.gpus),
        "no assignment is unfinished and no commitment is live"
    );
    let earned = ix.provider(&p[1].party.hash).expect("provider").earnings;
    assert_eq!(earned, pay1);
}

#[test]
fn an_expire_slashes_the_defaulter_and_splits_the_slash_as_the_rules_do() {
    let r = run();
    let (slash, recovered, burnt) = b_split(r);
    assert!(
        recovered > 0 && burnt > 0,
        "both parts of the split are tested"
    );
    // The harness builder agrees with the rules (a cross-check of the test's inputs).
    assert_eq!(r.expire_outcome.slashes, vec![slash]);
    assert_eq!(r.expire_outcome.burnt, burnt);

    let ix = replay(r, r.expire_b + 1);
    let b = view(&ix, &r.b);
    assert_eq!(b.status, JobStatus::Expired);
    let paid0 = pay_for(B0_GPU_MS, RATE);
    let expired = b
        .history
        .iter()
        .find_map(|rec| match &rec.event {
            Event::JobExpired {
                defaulters,
                refund,
                slashes,
                recovered,
                burnt,
                ..
            } => Some((
                defaulters.clone(),
                *refund,
                slashes.clone(),
                *recovered,
                *burnt,
            )),
            _ => None,
        })
        .expect("expired");
    let p1 = r.h.providers[1].party.hash;
    assert_eq!(expired.0, vec![p1], "only the provider that never claimed");
    assert_eq!(
        expired.1,
        BUDGET - paid0 + recovered,
        "escrow rest + recovered"
    );
    assert_eq!(expired.1, r.expire_outcome.refund);
    assert_eq!(
        expired.2,
        vec![Slash {
            provider: p1,
            index: 1,
            amount: slash
        }]
    );
    assert_eq!((expired.3, expired.4), (recovered, burnt));
    assert_eq!(b.defaulters(), vec![p1]);
    // The claim before the expiry still counts as a payment.
    assert_eq!(
        b.payments,
        vec![Payment {
            to: r.h.providers[0].party.hash,
            ntx: paid0
        }]
    );
    let summary = ix.provider(&p1).expect("provider");
    assert_eq!(summary.slashed, slash);
    assert_eq!(summary.defaults, vec![r.b]);
    // The slashed bond continues with its stake less the slash; the old one is gone.
    let live = ix.live_utxos().expect("utxos");
    assert!(live.iter().all(|t| t.reference != r.bond1_before));
    let bond1: Vec<_> = live
        .iter()
        .filter(|t| t.bond().is_some_and(|d| d.provider == p1))
        .collect();
    assert_eq!(bond1.len(), 1);
    assert_eq!(bond1[0].ntx, r.stake1 - slash);
    // The burnt output (`outputs[1]`) is never tracked as live.
    assert!(live.iter().all(|t| t.reference
        != TxoRef {
            tx_hash: r.expire_tx,
            index: 1
        }));
}

#[test]
fn a_burnt_datum_outside_an_expire_is_ignored() {
    let r = run();
    let ix = replay(r, r.blocks.len());
    let reasons: Vec<_> = events(&ix)
        .into_iter()
        .filter_map(|e| match e {
            Event::Ignored { utxo, reason } if utxo == r.junk => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("outside"), "{}", reasons[0]);
    // The expire's own burnt output is not reported as junk.
    let ignored_burnt = events(&ix)
        .iter()
        .filter(|e| matches!(e, Event::Ignored { reason, .. } if reason.contains("Burnt")))
        .count();
    assert_eq!(ignored_burnt, 1);
}

fn all(ix: &Indexer<MemoryKv>) -> Vec<(Vec<u8>, Vec<u8>)> {
    ix.kv().scan_prefix(b"").expect("scan")
}

#[test]
fn rolling_back_a_claim_or_an_expire_undoes_it() {
    let r = run();
    let ix = replay(r, r.blocks.len());
    let tip_before = |n: usize| {
        let t = replay(r, n).tip().expect("tip").expect("some");
        Some((t.slot, t.hash))
    };

    // Undo the expire: job B is back to claims in progress, provider 1's bond whole.
    ix.roll_back_to(tip_before(r.expire_b)).expect("rollback");
    let b = view(&ix, &r.b);
    assert_eq!(b.status, JobStatus::Claiming);
    assert!(b.defaulters().is_empty());
    assert!(
        ix.live_utxos()
            .expect("utxos")
            .iter()
            .any(|t| t.reference == r.bond1_before && t.ntx == r.stake1),
        "the slashed bond is live again, whole"
    );
    assert_eq!(
        ix.provider(&r.h.providers[1].party.hash)
            .expect("p")
            .slashed,
        0
    );

    // Undo provider 1's claim of job A: claims in progress again, one payment.
    ix.roll_back_to(tip_before(r.claim_a1)).expect("rollback");
    let a = view(&ix, &r.a);
    assert_eq!(a.status, JobStatus::Claiming);
    assert_eq!(a.claims[1], None);
    assert!(a.claims[0].is_some());
    assert_eq!(a.payments.len(), 1);
    assert!(
        !events(&ix)
            .iter()
            .any(|e| matches!(e, Event::JobClaimed { index: 1, job_id, .. } if *job_id == r.a)),
        "the claim's event is gone"
    );
    assert_eq!(
        all(&ix),
        all(&replay(r, r.claim_a1)),
        "same as never applied"
    );

    // Undo provider 0's claim too: assigned, nothing claimed, nothing paid.
    ix.roll_back_to(tip_before(r.claim_a0)).expect("rollback");
    let a = view(&ix, &r.a);
    assert_eq!(a.status, JobStatus::Assigned);
    assert_eq!(a.claims, vec![None, None]);
    assert_eq!(a.paid(), 0);

    // Replaying the rest lands on the same state as a fresh replay.
    for b in &r.blocks[r.claim_a0..] {
        ix.apply_block(b).expect("re-applies");
    }
    assert_eq!(all(&ix), all(&replay(r, r.blocks.len())));
}

#[test]
fn rolling_back_to_any_block_equals_replaying_up_to_it() {
    let r = run();
    for n in 0..r.blocks.len() {
        let ix = replay(r, r.blocks.len());
        let target = (n > 0).then(|| {
            let t = replay(r, n).tip().expect("tip").expect("some");
            (t.slot, t.hash)
        });
        ix.roll_back_to(target).expect("within the undo window");
        assert_eq!(all(&ix), all(&replay(r, n)), "rolled back to block {n}");
    }
}
