//! Block → events: pure functions over pallas-traverse transactions and the set of live
//! script UTxOs (escrows and bonds) the store already knows.
//!
//! Only authentic UTxOs count: an escrow must hold its thread token (policy = script hash,
//! name = job id), a bond its bond token (name = provider key hash) and at least
//! `min_bond_per_gpu × gpus` NTX, and both need a well-formed inline datum. Anything else at
//! the script address becomes an [`Event::Ignored`] with the reason. Transactions whose
//! scripts failed (`is_valid = false`) only consume collateral and yield nothing.
//!
//! This module finds the transaction's script outputs, the live script UTxOs it spends and
//! their redeemers; `v2` reads them as the `ganglion_v2` protocol (`docs/escrow-v2.md`).

mod owned;
mod v2;

pub(crate) use owned::into_txs;

use std::collections::BTreeMap;

use ganglion_cardano::txo::TxoRef;
use ganglion_contracts::params::PolicyId;
use ganglion_contracts::tx::Output;
use ganglion_contracts::v2::datum::{BondDatum, EscrowDatum, GanglionDatum};
use pallas_primitives::PlutusData;
use pallas_primitives::conway::RedeemerTag;
use pallas_traverse::{MultiEraOutput, MultiEraTx};
use serde::{Deserialize, Serialize};

use crate::event::Event;
use crate::watch::Watch;

/// A live, authentic script UTxO.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracked {
    /// Where it is.
    pub reference: TxoRef,
    /// Its datum (an escrow or a bond; a `Burnt` output is never live).
    pub datum: GanglionDatum,
    /// NTX base units it holds.
    pub ntx: u64,
    /// The output as Kupo shows it (`/matches`); absent in records written before it was
    /// kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Seen>,
}

/// What an escrow or bond output shows beyond its datum: address, whole value, datum hash,
/// and where it was created (Kupo's match object, [`Tracked::to_match`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    /// Raw address bytes, hex.
    #[serde(with = "hex::serde")]
    pub address: Vec<u8>,
    /// Lovelace.
    pub lovelace: u64,
    /// Native assets: policy id (hex), asset name (hex), quantity.
    pub assets: Vec<(String, String, u64)>,
    /// blake2b-256 of the inline datum's CBOR, hex.
    pub datum_hash: Option<String>,
    /// The block and position of the transaction that created it.
    pub created: Option<CreatedAt>,
}

/// Where an output was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedAt {
    /// Slot of the block.
    pub slot: u64,
    /// Header hash of the block.
    #[serde(with = "hex::serde")]
    pub block_hash: [u8; 32],
    /// Position of the transaction in the block.
    pub tx_index: u32,
}

impl Seen {
    /// What `o` (decoded) and `raw` (as on the chain, for the datum's own bytes) show.
    fn of(o: &Output, raw: &MultiEraOutput<'_>) -> Self {
        let datum_hash = match raw.datum() {
            Some(pallas_primitives::conway::DatumOption::Data(d)) => {
                Some(pallas_crypto::hash::Hasher::<256>::hash(d.0.raw_cbor()).to_string())
            }
            Some(pallas_primitives::conway::DatumOption::Hash(h)) => Some(h.to_string()),
            None => None,
        };
        Self {
            address: o.address.clone(),
            lovelace: o.value.lovelace,
            assets: o
                .value
                .iter_assets()
                .map(|(p, n, q)| (hex::encode(p), hex::encode(n), q))
                .collect(),
            datum_hash,
            created: None,
        }
    }
}

impl Tracked {
    /// Kupo's view of this output, when it was recorded with its [`Seen`] facts (escrows
    /// and bonds carry an inline datum and no reference script).
    pub fn to_match(&self) -> Option<ganglion_cardano::kupo::Match> {
        let seen = self.output.as_ref()?;
        let assets = seen
            .assets
            .iter()
            .map(|(p, n, q)| Some(((hex::decode(p).ok()?, hex::decode(n).ok()?), *q)))
            .collect::<Option<_>>()?;
        let datum_hash = match &seen.datum_hash {
            Some(h) => Some(hex::decode(h).ok()?.try_into().ok()?),
            None => None,
        };
        Some(ganglion_cardano::kupo::Match {
            reference: self.reference,
            address: seen.address.clone(),
            coins: seen.lovelace,
            assets,
            datum_hash,
            inline_datum: datum_hash.is_some(),
            script_hash: None,
            created: seen.created.map(|c| ganglion_cardano::kupo::Created {
                slot: c.slot,
                header_hash: c.block_hash,
                tx_index: c.tx_index,
            }),
        })
    }

    /// The escrow datum, when it is an escrow.
    pub fn escrow(&self) -> Option<&EscrowDatum> {
        match &self.datum {
            GanglionDatum::Escrow(e) => Some(e),
            _ => None,
        }
    }

    /// The bond datum, when it is a bond.
    pub fn bond(&self) -> Option<&BondDatum> {
        match &self.datum {
            GanglionDatum::Bond(b) => Some(b),
            _ => None,
        }
    }
}

/// What one transaction does to the indexer's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxEffects {
    /// Script UTxOs it spent.
    pub spent: Vec<TxoRef>,
    /// Authentic script UTxOs it created.
    pub created: Vec<Tracked>,
    /// Events, in order.
    pub events: Vec<Event>,
}

/// NTX base units a bond backing `gpus` GPUs must hold.
pub fn min_stake(watch: &Watch, gpus: u64) -> u64 {
    watch.min_stake(gpus)
}

/// Classifies an output at the script address: authentic escrow or bond (token and
/// well-formed datum), or why not. A bond's minimum stake is checked where it is posted
/// ([`extract_tx`]); a slashed bond may continue below it and is then not active. A
/// `Burnt` output is no live UTxO (it can never be spent): it is refused here too.
///
/// # Errors
/// The reason, in words, when the output is no authentic escrow or bond.
pub fn classify(watch: &Watch, reference: TxoRef, o: &Output) -> Result<Tracked, String> {
    match v2::classify(&watch.script_hash, &watch.params, reference, o)? {
        v2::Found::Live(t) => Ok(*t),
        v2::Found::Burnt { job_id, .. } => Err(format!(
            "burnt slash of job {job_id}: never spendable, not tracked"
        )),
    }
}

/// The raw address bytes of an output without parsing them (Byron outputs: none).
fn raw_address<'a>(o: &'a MultiEraOutput<'_>) -> Option<&'a [u8]> {
    use pallas_primitives::{babbage, conway};
    match o {
        MultiEraOutput::AlonzoCompatible(x, _) => Some(&x.address),
        MultiEraOutput::Babbage(x) => match &***x {
            babbage::TransactionOutput::Legacy(x) => Some(&x.address),
            babbage::TransactionOutput::PostAlonzo(x) => Some(&x.address),
        },
        MultiEraOutput::Conway(x) => match &***x {
            conway::TransactionOutput::Legacy(x) => Some(&x.address),
            conway::TransactionOutput::PostAlonzo(x) => Some(&x.address),
        },
        MultiEraOutput::Byron(_) => None,
        _ => None,
    }
}

/// A transaction as the protocol modules read it.
pub(crate) struct Scan {
    /// Transaction id.
    pub(crate) tx_hash: [u8; 32],
    /// Every output, in order.
    pub(crate) outputs: Vec<Output>,
    /// Indices of the outputs at the script address.
    pub(crate) ours: Vec<usize>,
    /// The live script UTxOs spent, with their spend redeemer (undecoded), in input order.
    pub(crate) spent: Vec<(Tracked, Option<PlutusData>)>,
    /// The validity interval's lower bound as POSIX ms (what a validator sees as the
    /// earliest possible time), when the tx has one and the watch knows the slot clock.
    pub(crate) lower_bound_ms: Option<u64>,
}

impl Scan {
    /// The reference of output `index`.
    pub(crate) fn reference(&self, index: usize) -> TxoRef {
        TxoRef {
            tx_hash: self.tx_hash,
            index: index as u64,
        }
    }
}

/// The effects of one transaction. `live` answers whether an input is a live script UTxO.
pub fn extract_tx(
    watch: &Watch,
    tx: &MultiEraTx<'_>,
    live: &dyn Fn(&TxoRef) -> Option<Tracked>,
) -> TxEffects {
    if !tx.is_valid() {
        return TxEffects::default();
    }
    let chain_outputs = tx.outputs();
    let ours: Vec<usize> = chain_outputs
        .iter()
        .enumerate()
        .filter(|(_, o)| raw_address(o).is_some_and(|a| watch.is_script_address(a)))
        .map(|(i, _)| i)
        .collect();
    // Fast path: no script output and no live script input → nothing to do.
    let spends_ours = tx.inputs().iter().any(|i| {
        live(&TxoRef {
            tx_hash: **i.hash(),
            index: i.index(),
        })
        .is_some()
    });
    if ours.is_empty() && !spends_ours {
        return TxEffects::default();
    }
    let redeemers: BTreeMap<u32, PlutusData> = tx
        .redeemers()
        .iter()
        .filter(|r| r.tag() == RedeemerTag::Spend)
        .map(|r| (r.index(), r.data().clone()))
        .collect();
    // Inputs are a set: pallas' `inputs_sorted_set` sorts and drops repeats, so an input
    // listed twice (refused by Conway's decoder, silently merged before protocol version 9)
    // is counted once and redeemer indices point into the deduplicated set, as the ledger's.
    let spent = tx
        .inputs_sorted_set()
        .iter()
        .enumerate()
        .filter_map(|(i, input)| {
            let reference = TxoRef {
                tx_hash: **input.hash(),
                index: input.index(),
            };
            let redeemer = u32::try_from(i)
                .ok()
                .and_then(|i| redeemers.get(&i).cloned());
            live(&reference).map(|t| (t, redeemer))
        })
        .collect();
    let scan = Scan {
        tx_hash: *tx.hash(),
        outputs: chain_outputs.iter().map(Output::from_chain).collect(),
        ours,
        spent,
        lower_bound_ms: tx
            .validity_start()
            .zip(watch.slot_config)
            .and_then(|(slot, c)| ganglion_cardano::time::slot_to_posix_ms(&c, slot).ok()),
    };
    let mut fx = v2::extract(&watch.script_hash, &watch.params, &scan);
    for t in &mut fx.created {
        let i = t.reference.index as usize;
        if let (Some(o), Some(raw)) = (scan.outputs.get(i), chain_outputs.get(i)) {
            t.output = Some(Seen::of(o, raw));
        }
    }
    fx
}

/// An escrow or bond output holds its own token of this script (`name`: the job id or the
/// provider key hash); `what` names it in the refusal.
pub(crate) fn holds_own_token(
    o: &Output,
    script_hash: &PolicyId,
    name: &[u8],
    what: impl FnOnce() -> String,
) -> Result<(), String> {
    if o.value.quantity(script_hash, name) == 1 {
        Ok(())
    } else {
        Err(what())
    }
}

/// Moves the outputs named by `Ignored` events out of `fx.created`.
fn drop_ignored(fx: &mut TxEffects) {
    let ignored: Vec<TxoRef> = fx
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Ignored { utxo, .. } => Some(*utxo),
            _ => None,
        })
        .collect();
    fx.created.retain(|t| !ignored.contains(&t.reference));
}
