//! Protocol v2 (`ganglion_v2`) through the devnet's ledger: accept paths, the adversary
//! suite (one test per attack, named after it; Rescale's in `rescale`), signed-message
//! cross-checks, and the claim bound as a property. As in v1, every reject test first shows
//! the unbroken transaction passing the ledger, then breaks one thing.

mod accept;
mod adversary;
mod bound;
mod collateral;
mod reject;
mod rescale;
mod signed;

use ganglion_contracts::Error;
use ganglion_contracts::test_utils::harness_v2::{Harness, Job};
use ganglion_contracts::test_utils::world::Party;
use ganglion_contracts::test_utils::{NTX, assert_script_fails};
use ganglion_contracts::tx::{Draft, Utxo};
use ganglion_contracts::v2::datum::{EscrowDatum, GanglionDatum};

/// One hour of 2 GPUs, in GPU-ms.
pub(crate) const TWO_GPU_HOURS_MS: u64 = 2 * 3_600_000;
/// What [`TWO_GPU_HOURS_MS`] pays at the default rate (2 NTX per GPU-hour): 4 NTX.
pub(crate) const PAY_FOR_AN_HOUR: u64 = 4 * NTX;

/// `(lovelace, NTX)` of every party: the orchestrator, each provider (wallet and payout
/// address), the third party.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Books {
    pub(crate) orch: (u64, u64),
    pub(crate) providers: Vec<(u64, u64)>,
    pub(crate) third: (u64, u64),
}

pub(crate) fn books(h: &Harness) -> Books {
    Books {
        orch: h.orch_holdings(),
        providers: (0..h.providers.len())
            .map(|i| h.provider_holdings(i))
            .collect(),
        third: h.third_holdings(),
    }
}

/// `n` providers bonded, a 1 000 NTX job with a deadline in 2 h assigned to all of them at
/// the current slot, and the world one hour later.
pub(crate) fn assigned(n: usize) -> (Harness, Job) {
    let mut h = Harness::new(n);
    h.post_bonds();
    let (mut job, _) = h.lock(1_000 * NTX, 7200);
    h.assign(&mut job);
    h.world.slot += 3600;
    (h, job)
}

/// `good` passes the devnet ledger (judged, not applied); `broken` is refused by the
/// validator; nobody's holdings moved.
#[track_caller]
pub(crate) fn passes_then_rejected(h: &Harness, payer: &Party, good: Draft, broken: Draft) {
    let before = books(h);
    h.judge(good, payer, &[])
        .expect("the unbroken transaction passes the ledger");
    assert_script_fails(h.balance(broken, payer));
    assert_eq!(books(h), before, "a refused transaction moves nothing");
}

/// A copy of the escrow `utxo` whose datum `f` rewrote: a view to have a builder draft an
/// action it would refuse. [`respend`] puts the real UTxO back into the draft, so the
/// validator judges the real datum.
pub(crate) fn faked(utxo: &Utxo, f: impl FnOnce(&mut EscrowDatum)) -> Utxo {
    let mut e = ganglion_contracts::test_utils::harness_v2::escrow_of(utxo);
    f(&mut e);
    let mut u = utxo.clone();
    u.output.datum = Some(GanglionDatum::Escrow(e).to_plutus_data());
    u
}

/// A copy of the bond `utxo` whose datum `f` rewrote (see [`faked`]).
pub(crate) fn faked_bond(
    utxo: &Utxo,
    f: impl FnOnce(&mut ganglion_contracts::v2::datum::BondDatum),
) -> Utxo {
    let d = GanglionDatum::from_plutus_data(utxo.output.datum.as_ref().expect("inline datum"))
        .expect("datum decodes");
    let GanglionDatum::Bond(mut b) = d else {
        panic!("not a bond: {d:?}")
    };
    f(&mut b);
    let mut u = utxo.clone();
    u.output.datum = Some(GanglionDatum::Bond(b).to_plutus_data());
    u
}

/// Replaces the draft's input at `real.reference` by `real` (keeping its redeemer).
pub(crate) fn respend(d: &mut Draft, real: &Utxo) {
    let entry = d
        .inputs
        .get_mut(&real.reference)
        .expect("the draft spends it");
    entry.0 = real.clone();
}

/// Asserts the ledger (phase 1) refused the transaction for its validity interval.
#[track_caller]
pub(crate) fn assert_outside_validity<T: std::fmt::Debug>(r: ganglion_contracts::Result<T>) {
    match r {
        Err(Error::Rejected(r)) => assert!(
            format!("{r:?}").starts_with("OutsideValidityIntervalUTxO"),
            "{r:?}"
        ),
        other => panic!("expected OutsideValidityIntervalUTxO, got {other:?}"),
    }
}
