//! Balancing: wallet inputs, change, collateral, ExUnits by evaluation and the exact fee,
//! iterated to a fixed point.

use std::collections::{BTreeMap, BTreeSet};

use pallas_primitives::conway::VKeyWitness;

use crate::env::Env;
use crate::error::{Error, Result};
use crate::eval::evaluate;
use crate::fees::{min_fee, min_utxo, required_collateral, tx_size_for_fee};
use crate::params::{KeyHash, PolicyId};
use crate::protocol::ExUnits;
use crate::tx::Purpose;
use crate::tx::assemble::{Assembly, dummy_witnesses, encode};
use crate::tx::{Draft, Output, Utxo, Value, body_hash, encode_output};

/// Rounds of fee/ExUnits iteration before giving up.
const MAX_ROUNDS: usize = 12;

/// The largest pure-ADA UTxO (lovelace) the balancer puts up whole as collateral, without a
/// collateral return: 5 ADA, the bound CIP-30 wallets set aside for `getCollateral`.
///
/// Without a return the transaction carries neither a collateral return output (≈ 60–85
/// bytes) nor `total_collateral`: ≈ 3 000–4 000 lovelace less fee per script transaction.
/// The price is that a phase-2 failure would take the whole UTxO (at most 5 ADA) instead of
/// `fee × collateralPercentage / 100`. [`balance`] runs every script before it returns, under
/// the cost model the script integrity hash pins (another one fails phase 1, which takes no
/// collateral), on the very inputs the transaction spends and references, and a node's
/// mempool refuses a transaction marked valid whose scripts fail: the collateral is at stake
/// only if uplc and the ledger's evaluator disagreed. A larger pure-ADA UTxO, or one carrying
/// tokens, is put up with a return of everything above the required collateral.
pub const MAX_COLLATERAL_WITHOUT_RETURN: u64 = 5_000_000;

/// The key-locked UTxOs a party may spend, its key and where its change goes.
#[derive(Debug, Clone)]
pub struct Wallet<'a> {
    /// Spendable UTxOs (all locked by `key_hash`).
    pub utxos: &'a [Utxo],
    /// The payment key hash locking them.
    pub key_hash: KeyHash,
    /// Change address bytes.
    pub change_address: Vec<u8>,
}

/// A balanced transaction: exact fee, ExUnits as evaluated, ready to sign.
#[derive(Debug, Clone)]
pub struct Balanced {
    draft: Draft,
    extra_inputs: Vec<Utxo>,
    change: Option<Output>,
    /// Collateral input, total collateral (lovelace) and return; without a return the total
    /// is the input's lovelace and is not declared (see `assemble::Assembly::collateral`).
    collateral: Option<(Utxo, u64, Option<Output>)>,
    cost_model_v3: Vec<i64>,
    /// Unsigned transaction CBOR (no vkey witnesses), e.g. for a CIP-30 wallet's `signTx`.
    pub unsigned: Vec<u8>,
    /// Transaction id (blake2b-256 of the body).
    pub hash: [u8; 32],
    /// Fee, lovelace.
    pub fee: u64,
    /// Size of the transaction once signed by `witness_count` keys, bytes.
    pub size: usize,
    /// Vkey witnesses the fee was computed for.
    pub witness_count: usize,
    /// ExUnits of each redeemer.
    pub ex_units: BTreeMap<Purpose, ExUnits>,
    /// Reference-script bytes the fee paid for.
    pub ref_script_bytes: u64,
}

impl Balanced {
    /// Sum of all redeemers' ExUnits.
    pub fn total_ex_units(&self) -> ExUnits {
        self.ex_units
            .values()
            .fold(ExUnits::default(), |a, e| a.plus(*e))
    }

    /// The outputs in transaction order (the draft's, then change).
    pub fn outputs(&self) -> Vec<Output> {
        let mut o = self.draft.outputs.clone();
        o.extend(self.change.clone());
        o
    }

    /// Every UTxO the transaction spends.
    pub fn spent(&self) -> Vec<Utxo> {
        self.draft
            .inputs
            .values()
            .map(|(u, _)| u.clone())
            .chain(self.extra_inputs.iter().cloned())
            .collect()
    }

    /// Every UTxO the ledger must resolve: spent, referenced and collateral.
    pub fn resolved(&self) -> Vec<Utxo> {
        resolved(
            &self.draft,
            &self.extra_inputs,
            self.collateral.as_ref().map(|c| &c.0),
        )
    }

    /// The draft the transaction was built from.
    pub fn draft(&self) -> &Draft {
        &self.draft
    }

    /// Re-encodes with the given witnesses (the body is unchanged).
    pub(crate) fn with_witnesses(&self, witnesses: Vec<VKeyWitness>) -> Result<Vec<u8>> {
        let asm = Assembly {
            draft: &self.draft,
            extra_inputs: &self.extra_inputs,
            change: self.change.as_ref(),
            fee: self.fee,
            ex_units: &self.ex_units,
            collateral: self
                .collateral
                .as_ref()
                .map(|(u, t, r)| (u, *t, r.as_ref())),
            witnesses: &witnesses,
            cost_model_v3: &self.cost_model_v3,
        };
        Ok(encode(&asm)?.0)
    }
}

/// Spent, referenced and collateral UTxOs, each once.
fn resolved(draft: &Draft, extra: &[Utxo], collateral: Option<&Utxo>) -> Vec<Utxo> {
    let mut all: Vec<Utxo> = draft.inputs.values().map(|(u, _)| u.clone()).collect();
    all.extend(extra.iter().cloned());
    all.extend(draft.reference_inputs.values().cloned());
    if let Some(c) = collateral.filter(|c| !all.iter().any(|u| u.reference == c.reference)) {
        all.push(c.clone());
    }
    all
}

/// What is missing when outputs and fee exceed the inputs: lovelace, and assets as
/// `(policy hex, name hex, quantity)`.
type Shortfall = (u64, Vec<(String, String, u64)>);

/// Signed quantities per asset, lovelace under the empty policy.
type Ledger = BTreeMap<(PolicyId, Vec<u8>), i128>;

const LOVELACE: (PolicyId, Vec<u8>) = ([0u8; 28], Vec::new());

fn add_value(l: &mut Ledger, v: &Value, sign: i128) {
    *l.entry(LOVELACE).or_default() += sign * i128::from(v.lovelace);
    for (p, n, q) in v.iter_assets() {
        *l.entry((p, n.to_vec())).or_default() += sign * i128::from(q);
    }
}

/// consumed − produced (without fee) for the draft plus `extra` inputs.
fn surplus(draft: &Draft, extra: &[Utxo]) -> Ledger {
    let mut l = Ledger::new();
    for (u, _) in draft.inputs.values() {
        add_value(&mut l, &u.output.value, 1);
    }
    for u in extra {
        add_value(&mut l, &u.output.value, 1);
    }
    for (p, names) in &draft.mint {
        for (n, q) in names {
            *l.entry((*p, n.clone())).or_default() += i128::from(*q);
        }
    }
    for o in &draft.outputs {
        add_value(&mut l, &o.value, -1);
    }
    l
}

/// The change value for a surplus, or the shortfall when some quantity is negative.
fn change_value(s: &Ledger, fee: u64) -> std::result::Result<Value, Shortfall> {
    let mut v = Value::default();
    let mut short_assets = Vec::new();
    let lovelace = s.get(&LOVELACE).copied().unwrap_or(0) - i128::from(fee);
    for ((p, n), q) in s {
        if (p, n) == (&LOVELACE.0, &LOVELACE.1) {
            continue;
        }
        match u64::try_from(*q) {
            Ok(q) => v.add_asset(*p, n, q),
            Err(_) => short_assets.push((hex::encode(p), hex::encode(n), q.unsigned_abs() as u64)),
        }
    }
    if lovelace < 0 || !short_assets.is_empty() {
        return Err((
            u64::try_from(-lovelace.min(0)).unwrap_or(u64::MAX),
            short_assets,
        ));
    }
    v.lovelace = lovelace as u64;
    Ok(v)
}

/// Lovelace an output needs at least.
/// Lovelace `o` needs at least: its min-UTxO, measured with a full-width lovelace field.
///
/// # Errors
/// Only on encoding failures.
pub fn output_min_lovelace(env: &Env, o: &Output) -> Result<u64> {
    // Encoding size depends on the lovelace field's width: measure with the largest width.
    let mut probe = o.clone();
    probe.value.lovelace = u64::MAX;
    Ok(min_utxo(&env.params, encode_output(&probe)?.len() as u64))
}

/// Wallet UTxOs ordered for selection: those holding a needed asset first, then pure-ADA
/// ones holding at least `lovelace_wanted`, then by lovelace, largest first; never one
/// already spent by the draft.
///
/// When only lovelace is missing, a pure-ADA UTxO that covers it keeps the change free of
/// tokens: an ADA-only change value is ≈ 9 bytes where one carrying the wallet's NTX is ≈ 51
/// (≈ 1 850 lovelace of fee per transaction); one UTxO that covers it beats several small
/// ones (each input is ≈ 36 bytes, and every script walks it).
fn selection_order<'a>(
    draft: &Draft,
    wallet: &'a Wallet<'_>,
    needed: &BTreeSet<(PolicyId, Vec<u8>)>,
    lovelace_wanted: u64,
) -> Vec<&'a Utxo> {
    // Never an input the draft already spends (inputs are a set), nor one it references
    // (Conway `BabbageNonDisjointRefInputs`, protocol versions 9–10), nor one carrying a
    // reference script: its bytes would add to the fee (`txNonDistinctRefScriptsSize`
    // counts the reference scripts of spent inputs) and `ref_script_bytes` prices the
    // draft's only.
    let mut c: Vec<&Utxo> = wallet
        .utxos
        .iter()
        .filter(|u| {
            !draft.inputs.contains_key(&u.reference)
                && !draft.reference_inputs.contains_key(&u.reference)
                && u.output.script_ref.is_none()
        })
        .collect();
    c.sort_by_key(|u| {
        let useful = u
            .output
            .value
            .iter_assets()
            .any(|(p, n, _)| needed.contains(&(p, n.to_vec())));
        let covers_in_ada =
            u.output.value.is_pure_ada() && u.output.value.lovelace >= lovelace_wanted;
        (
            !useful,
            !covers_in_ada,
            std::cmp::Reverse(u.output.value.lovelace),
            u.reference,
        )
    });
    c
}

fn ref_script_bytes(draft: &Draft) -> u64 {
    draft
        .inputs
        .values()
        .map(|(u, _)| &u.output)
        .chain(draft.reference_inputs.values().map(|u| &u.output))
        .filter_map(|o| o.script_ref.as_ref())
        .map(|s| s.len() as u64)
        .sum()
}

/// Balances `draft` with the wallet: picks inputs (a pure-ADA UTxO that covers it when only
/// lovelace is missing, so the change carries no tokens), adds a change output, chooses
/// collateral when scripts run (a pure-ADA UTxO of at most [`MAX_COLLATERAL_WITHOUT_RETURN`]
/// put up whole without a return when the wallet has one, else one with a collateral
/// return), evaluates every script with uplc and sets each redeemer's ExUnits to what it
/// consumed, and sets the fee to the exact minimum for the resulting size, ExUnits and
/// reference scripts, repeating until nothing changes.
///
/// The fee accounts for one vkey witness per distinct key among the required signers and the
/// wallet's key (when a wallet UTxO is spent or used as collateral).
///
/// # Errors
/// [`Error::Unbalanceable`] when the wallet cannot cover outputs, fee and change;
/// [`Error::NoCollateral`]; [`Error::ScriptFailed`] when a script rejects the transaction;
/// [`Error::OutputBelowMinUtxo`], [`Error::ExUnitsTooLarge`], [`Error::TxTooLarge`],
/// [`Error::FeeDidNotConverge`].
pub fn balance(draft: Draft, wallet: &Wallet<'_>, env: &Env) -> Result<Balanced> {
    let pp = &env.params;
    for (index, o) in draft.outputs.iter().enumerate() {
        let required = output_min_lovelace(env, o)?;
        if o.value.lovelace < required {
            return Err(Error::OutputBelowMinUtxo {
                index,
                required,
                provided: o.value.lovelace,
            });
        }
    }
    // Conway `disjointRefInputs` (protocol versions 9 and 10): no input is also a
    // reference input.
    let overlap: Vec<String> = draft
        .inputs
        .keys()
        .filter(|r| draft.reference_inputs.contains_key(r))
        .map(ToString::to_string)
        .collect();
    if !overlap.is_empty() {
        return Err(Error::InputAlsoReferenced { inputs: overlap });
    }
    let ref_bytes = ref_script_bytes(&draft);
    let scripts = draft.has_scripts();
    let mut fee: u64 = 0;
    let mut ex_units: BTreeMap<Purpose, ExUnits> = BTreeMap::new();
    let mut extra: Vec<Utxo> = Vec::new();
    let min_ada_change = output_min_lovelace(
        env,
        &Output::new(wallet.change_address.clone(), Value::default()),
    )?;

    for round in 0..MAX_ROUNDS {
        // 1. inputs: add wallet UTxOs until outputs + fee + change are covered.
        let (change, extra_now) = loop {
            let s = surplus(&draft, &extra);
            match change_value(&s, fee) {
                Ok(v) => {
                    let change = Output::new(wallet.change_address.clone(), v);
                    let min = output_min_lovelace(env, &change)?;
                    if change.value.lovelace >= min {
                        break (Some(change), extra.clone());
                    }
                    if change.value.lovelace == 0 && change.value.is_pure_ada() {
                        break (None, extra.clone());
                    }
                    let short = min - change.value.lovelace;
                    if !add_one(&draft, wallet, &mut extra, &BTreeSet::new(), short) {
                        return Err(Error::Unbalanceable {
                            lovelace_short: short,
                            assets_short: Vec::new(),
                        });
                    }
                }
                Err((lovelace_short, assets_short)) => {
                    let needed: BTreeSet<_> = s
                        .iter()
                        .filter(|(_, q)| **q < 0)
                        .map(|(k, _)| k.clone())
                        .collect();
                    // A pure-ADA UTxO covers the lovelace when it also leaves a
                    // pure-ADA change its minimum.
                    let wanted = lovelace_short.saturating_add(min_ada_change);
                    if !add_one(&draft, wallet, &mut extra, &needed, wanted) {
                        return Err(Error::Unbalanceable {
                            lovelace_short,
                            assets_short,
                        });
                    }
                }
            }
        };
        extra = extra_now;

        // 2. collateral: the smallest pure-ADA UTxO of at most
        // `MAX_COLLATERAL_WITHOUT_RETURN` that covers the required collateral, put up whole
        // without a return (Babbage: collateral inputs net of no return are ADA only and
        // cover the requirement; `total_collateral` may be left out); else a wallet UTxO
        // (pure ADA preferred) whose tokens and lovelace above the required collateral
        // come back in the collateral return.
        let collateral = if scripts {
            let total = required_collateral(pp, fee.max(1));
            let candidates = || {
                wallet
                    .utxos
                    .iter()
                    .filter(|u| u.output.script_ref.is_none())
            };
            let whole = candidates()
                .filter(|u| {
                    u.output.value.is_pure_ada()
                        && (total..=MAX_COLLATERAL_WITHOUT_RETURN)
                            .contains(&u.output.value.lovelace)
                })
                .min_by_key(|u| (u.output.value.lovelace, u.reference));
            let mut best: Option<(Utxo, u64, Option<Output>)> =
                whole.map(|u| (u.clone(), u.output.value.lovelace, None));
            // The fallback, only when no UTxO serves without a return.
            let with_return = if whole.is_none() {
                candidates().collect()
            } else {
                Vec::new()
            };
            for c in with_return {
                let Some(rest) = c.output.value.lovelace.checked_sub(total) else {
                    continue;
                };
                let mut ret_value = c.output.value.clone();
                ret_value.lovelace = rest;
                let ret = Output::new(wallet.change_address.clone(), ret_value);
                if rest < output_min_lovelace(env, &ret)? {
                    continue;
                }
                let better = best.as_ref().is_none_or(|(b, _, _)| {
                    (c.output.value.is_pure_ada(), c.output.value.lovelace)
                        > (b.output.value.is_pure_ada(), b.output.value.lovelace)
                });
                if better {
                    best = Some((c.clone(), total, Some(ret)));
                }
            }
            Some(best.ok_or(Error::NoCollateral { required: total })?)
        } else {
            None
        };

        // 3. witnesses the fee must pay for.
        let wallet_used = !extra.is_empty()
            || collateral.is_some()
            || draft.inputs.values().any(|(u, r)| {
                r.is_none() && wallet.utxos.iter().any(|w| w.reference == u.reference)
            });
        let mut keys = draft.required_signers.clone();
        if wallet_used {
            keys.insert(wallet.key_hash);
        }
        let witness_count = keys.len();

        // 4. encode, evaluate, price.
        let dummies = dummy_witnesses(witness_count);
        let asm = Assembly {
            draft: &draft,
            extra_inputs: &extra,
            change: change.as_ref(),
            fee,
            ex_units: &ex_units,
            collateral: collateral.as_ref().map(|(u, t, r)| (u, *t, r.as_ref())),
            witnesses: &dummies,
            cost_model_v3: &pp.cost_model_v3,
        };
        let (signed_size_probe, body) = encode(&asm)?;
        let evaluated: BTreeMap<Purpose, ExUnits> = if scripts {
            let all = resolved(&draft, &extra, collateral.as_ref().map(|c| &c.0));
            evaluate(&signed_size_probe, &all, pp, &env.slot_config)?
                .into_iter()
                .map(|e| (e.purpose, e.ex_units))
                .collect()
        } else {
            BTreeMap::new()
        };
        let total = evaluated
            .values()
            .fold(ExUnits::default(), |a, e| a.plus(*e));
        if total.mem > pp.max_tx_ex_units.mem || total.steps > pp.max_tx_ex_units.steps {
            return Err(Error::ExUnitsTooLarge {
                mem: total.mem,
                steps: total.steps,
            });
        }
        let size = signed_size_probe.len();
        // The fee and `maxTxSize` count the transaction without its `is_valid` flag.
        let ledger_size = tx_size_for_fee(&signed_size_probe)?;
        let required_fee = min_fee(
            pp,
            ledger_size,
            ex_units
                .values()
                .fold(ExUnits::default(), |a, e| a.plus(*e)),
            ref_bytes,
        );
        let stable =
            evaluated == ex_units && (fee == required_fee || (round >= 4 && fee > required_fee));
        if stable {
            if ledger_size > pp.max_tx_size {
                return Err(Error::TxTooLarge {
                    size: usize::try_from(ledger_size).unwrap_or(usize::MAX),
                    max: pp.max_tx_size,
                });
            }
            let unsigned = {
                let asm = Assembly {
                    witnesses: &[],
                    ..asm
                };
                encode(&asm)?.0
            };
            return Ok(Balanced {
                hash: body_hash(&body),
                draft,
                extra_inputs: extra,
                change,
                collateral,
                cost_model_v3: pp.cost_model_v3.clone(),
                unsigned,
                fee,
                size,
                witness_count,
                ex_units,
                ref_script_bytes: ref_bytes,
            });
        }
        ex_units = evaluated;
        // Past a few rounds only let the fee grow, so the iteration must settle.
        fee = if round >= 4 {
            fee.max(required_fee)
        } else {
            required_fee
        };
    }
    Err(Error::FeeDidNotConverge { rounds: MAX_ROUNDS })
}

/// Adds the next wallet UTxO in selection order ([`selection_order`]); false when none is
/// left.
fn add_one(
    draft: &Draft,
    wallet: &Wallet<'_>,
    extra: &mut Vec<Utxo>,
    needed: &BTreeSet<(PolicyId, Vec<u8>)>,
    lovelace_wanted: u64,
) -> bool {
    let next = selection_order(draft, wallet, needed, lovelace_wanted)
        .into_iter()
        .find(|u| !extra.iter().any(|e: &Utxo| e.reference == u.reference));
    match next {
        Some(u) => {
            extra.push(u.clone());
            true
        }
        None => false,
    }
}
