//! Bond actions: post, top up, unbond, withdraw.

use crate::env::Env;
use crate::error::{Error, Result};
use crate::time::slot_to_posix_ms;
use crate::tx::funded;
use crate::tx::{Draft, Utxo, Value};
use crate::v2::build::{Deployment, bond_datum};
use crate::v2::datum::{BondDatum, Commitment, GanglionDatum, JobId};
use crate::v2::params::KeyHash;
use crate::v2::payout::Payout;
use crate::v2::redeemer::{MintRedeemer, SpendRedeemer};

/// What a provider bonds.
#[derive(Debug, Clone)]
pub struct BondRequest {
    /// The provider's payment key hash (also the bond token name).
    pub provider: KeyHash,
    /// ed25519 key signing acceptances, attestations and offers.
    pub attest_key: [u8; 32],
    /// libp2p peer id bytes.
    pub peer_id: Vec<u8>,
    /// Where claims pay this provider: payment key `provider`, any stake part.
    pub payout: Payout,
    /// GPUs the bond backs (> 0).
    pub gpus: u64,
    /// NTX base units staked (≥ `min_bond_per_gpu × gpus`).
    pub stake: u64,
}

/// Post a bond: mint the bond token and lock the stake at the script address.
///
/// # Errors
/// [`Error::InvalidRequest`] for zero GPUs, a stake below the minimum or a payout address
/// whose payment key is not the provider's.
pub fn post_bond(dep: &Deployment, env: &Env, req: &BondRequest) -> Result<Draft> {
    if req.payout.key != req.provider {
        return Err(Error::InvalidRequest(
            "the payout address must be paid to the provider's own key".into(),
        ));
    }
    if req.gpus == 0 {
        return Err(Error::InvalidRequest(
            "a bond must back at least 1 GPU".into(),
        ));
    }
    let min = dep.params.min_bond_per_gpu.saturating_mul(req.gpus);
    if req.stake < min {
        return Err(Error::InvalidRequest(format!(
            "stake {} is below the minimum {min} for {} GPUs",
            req.stake, req.gpus
        )));
    }
    let datum = GanglionDatum::Bond(BondDatum {
        provider: req.provider,
        attest_key: req.attest_key,
        peer_id: req.peer_id.clone(),
        payout: req.payout,
        gpus: req.gpus,
        unbonding_since_ms: None,
        commitments: Vec::new(),
    });
    let value = Value::default()
        .with_class(&dep.params.ntx, req.stake)
        .with(dep.script.hash, &req.provider, 1);
    // Lovelace for the largest datum the bond can carry after an assign (one commitment per
    // GPU, every field at its widest): an assign never has to top the bond up, so the
    // orchestrator pays nothing into a provider's bond.
    let mut bond = funded(
        env,
        dep.address(env),
        value,
        Some(widest(&datum).to_plutus_data()),
    )?;
    bond.datum = Some(datum.to_plutus_data());
    let mut d = Draft::default();
    d.mint(
        dep.script.hash,
        &req.provider,
        1,
        MintRedeemer::PostBond.to_plutus_data(),
    )
    .pay(bond)
    .reference(dep.reference.clone())
    .signer(req.provider);
    Ok(d)
}

/// `datum` with the widest commitments a bond of its GPUs can hold at once and the widest
/// unbonding time: what its lovelace must cover.
fn widest(datum: &GanglionDatum) -> GanglionDatum {
    let GanglionDatum::Bond(b) = datum else {
        return datum.clone();
    };
    let widest = Commitment {
        job_id: JobId([0xff; 32]),
        gpus: u64::MAX,
        until_ms: u64::MAX,
    };
    let n = usize::try_from(b.gpus)
        .unwrap_or(usize::MAX)
        .min(MAX_COMMITMENTS);
    GanglionDatum::Bond(BondDatum {
        unbonding_since_ms: Some(u64::MAX),
        commitments: vec![widest; n],
        ..b.clone()
    })
}

/// Commitments a bond's lovelace is sized for at most (one per GPU up to this many).
const MAX_COMMITMENTS: usize = 64;

/// Unbond: start the unbonding clock at the transaction's upper validity bound (the bond's
/// lovelace is raised to the larger datum's min-UTxO when needed). Valid from
/// `valid_from_slot`, whose start must lie after every commitment's `until` (DESIGN §3.1 G5:
/// a bond cannot leave an assignment that may still be slashed).
///
/// # Errors
/// [`Error::InvalidRequest`] when the bond is already unbonding or still backs a live
/// commitment at `valid_from_slot`; [`Error::Time`] for a validity bound outside the slot
/// clock.
pub fn unbond(
    dep: &Deployment,
    env: &Env,
    bond: &Utxo,
    valid_from_slot: u64,
    valid_until_slot: u64,
) -> Result<Draft> {
    let b = bond_datum(dep, env, bond)?;
    if b.unbonding_since_ms.is_some() {
        return Err(Error::InvalidRequest(
            "the bond is already unbonding".into(),
        ));
    }
    let from_ms = slot_to_posix_ms(&env.slot_config, valid_from_slot)?;
    if let Some(c) = b.commitments.iter().find(|c| c.is_live(from_ms)) {
        return Err(Error::InvalidRequest(format!(
            "the bond backs job {} until {} ms: it cannot unbond before",
            c.job_id, c.until_ms
        )));
    }
    let since = slot_to_posix_ms(&env.slot_config, valid_until_slot)?;
    let next = GanglionDatum::Bond(BondDatum {
        unbonding_since_ms: Some(since),
        ..b.clone()
    });
    let mut d = Draft::default();
    d.spend_script(bond.clone(), SpendRedeemer::Unbond.to_plutus_data())
        .pay(funded(
            env,
            bond.output.address.clone(),
            bond.output.value.clone(),
            Some(next.to_plutus_data()),
        )?)
        .reference(dep.reference.clone())
        .signer(b.provider)
        .validity(Some(valid_from_slot), Some(valid_until_slot));
    Ok(d)
}

/// Top up: add `add_ntx` NTX base units to a live bond's stake (the provider signs; the bond
/// continues at the same address with the same datum, its lovelace raised to the min-UTxO
/// when needed) — e.g. after a slash left it below `min_bond_per_gpu × gpus`, which takes it
/// out of the market until then.
///
/// # Errors
/// [`Error::InvalidRequest`] when `add_ntx` is 0, the bond is unbonding or the stake would
/// overflow.
pub fn top_up(dep: &Deployment, env: &Env, bond: &Utxo, add_ntx: u64) -> Result<Draft> {
    let b = bond_datum(dep, env, bond)?;
    if add_ntx == 0 {
        return Err(Error::InvalidRequest("a top-up must add NTX".into()));
    }
    if b.unbonding_since_ms.is_some() {
        return Err(Error::InvalidRequest(
            "the bond is unbonding: post a new one instead".into(),
        ));
    }
    let mut value = bond.output.value.clone();
    let stake = value.quantity_of(&dep.params.ntx);
    if stake.checked_add(add_ntx).is_none() {
        return Err(Error::InvalidRequest(format!(
            "stake {stake} + {add_ntx} overflows"
        )));
    }
    value.add_asset(dep.params.ntx.policy, &dep.params.ntx.name, add_ntx);
    let mut d = Draft::default();
    d.spend_script(bond.clone(), SpendRedeemer::TopUp.to_plutus_data())
        .pay(funded(
            env,
            bond.output.address.clone(),
            value,
            bond.output.datum.clone(),
        )?)
        .reference(dep.reference.clone())
        .signer(b.provider);
    Ok(d)
}

/// Withdraw: after the unbonding delay, burn the bond token and return the stake (to the
/// balancing wallet's change).
///
/// # Errors
/// [`Error::InvalidRequest`] when the bond is not unbonding.
pub fn withdraw(dep: &Deployment, env: &Env, bond: &Utxo, valid_from_slot: u64) -> Result<Draft> {
    let b = bond_datum(dep, env, bond)?;
    if b.unbonding_since_ms.is_none() {
        return Err(Error::InvalidRequest("the bond is not unbonding".into()));
    }
    let mut d = Draft::default();
    d.spend_script(bond.clone(), SpendRedeemer::Withdraw.to_plutus_data())
        .mint(
            dep.script.hash,
            &b.provider,
            -1,
            MintRedeemer::Burn.to_plutus_data(),
        )
        .reference(dep.reference.clone())
        .signer(b.provider)
        .validity(Some(valid_from_slot), None);
    Ok(d)
}
