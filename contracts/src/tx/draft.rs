//! What an action needs from a transaction, before wallet inputs, change and collateral.

use std::collections::{BTreeMap, BTreeSet};

use pallas_primitives::PlutusData;

use crate::params::{KeyHash, PolicyId};
use crate::tx::{Output, TxoRef, Utxo};

/// What a redeemer is for, as the ledger keys it (`RedeemersKey` tag and index).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Purpose {
    /// Spending the input at this index of the sorted input set.
    Spend(u32),
    /// Minting under the policy at this index of the sorted mint map.
    Mint(u32),
}

/// A transaction in the making. Inputs are kept sorted by reference, as the ledger orders
/// them (redeemer indices refer to that order).
#[derive(Debug, Clone, Default)]
pub struct Draft {
    /// Inputs to spend, each with its spend redeemer when it sits at a script.
    pub inputs: BTreeMap<TxoRef, (Utxo, Option<PlutusData>)>,
    /// Reference inputs (reference scripts, bonds).
    pub reference_inputs: BTreeMap<TxoRef, Utxo>,
    /// Outputs, in order (validators rely on positions).
    pub outputs: Vec<Output>,
    /// Minted (+) and burnt (−) quantities.
    pub mint: BTreeMap<PolicyId, BTreeMap<Vec<u8>, i64>>,
    /// Mint redeemer per policy.
    pub mint_redeemers: BTreeMap<PolicyId, PlutusData>,
    /// `required_signers`.
    pub required_signers: BTreeSet<KeyHash>,
    /// First valid slot (inclusive).
    pub valid_from_slot: Option<u64>,
    /// First invalid slot (`ttl`, exclusive).
    pub valid_until_slot: Option<u64>,
    /// Plutus V3 scripts carried in the witness set (when not used by reference).
    pub witness_scripts: Vec<Vec<u8>>,
}

impl Draft {
    /// Spends a key-locked input.
    pub fn spend(&mut self, utxo: Utxo) -> &mut Self {
        self.inputs.insert(utxo.reference, (utxo, None));
        self
    }

    /// Spends a script-locked input with `redeemer`.
    pub fn spend_script(&mut self, utxo: Utxo, redeemer: PlutusData) -> &mut Self {
        self.inputs.insert(utxo.reference, (utxo, Some(redeemer)));
        self
    }

    /// References an output without spending it.
    pub fn reference(&mut self, utxo: Utxo) -> &mut Self {
        self.reference_inputs.insert(utxo.reference, utxo);
        self
    }

    /// Appends an output.
    pub fn pay(&mut self, output: Output) -> &mut Self {
        self.outputs.push(output);
        self
    }

    /// Mints (`quantity` > 0) or burns (< 0) under a script policy with `redeemer`.
    pub fn mint(
        &mut self,
        policy: PolicyId,
        name: &[u8],
        quantity: i64,
        redeemer: PlutusData,
    ) -> &mut Self {
        if quantity != 0 {
            *self
                .mint
                .entry(policy)
                .or_default()
                .entry(name.to_vec())
                .or_default() += quantity;
        }
        self.mint_redeemers.insert(policy, redeemer);
        self
    }

    /// Requires a signature by `key`.
    pub fn signer(&mut self, key: KeyHash) -> &mut Self {
        self.required_signers.insert(key);
        self
    }

    /// Sets the validity interval `[from, until)` in slots.
    pub fn validity(&mut self, from: Option<u64>, until: Option<u64>) -> &mut Self {
        self.valid_from_slot = from;
        self.valid_until_slot = until;
        self
    }

    /// True when some script runs.
    pub fn has_scripts(&self) -> bool {
        !self.mint_redeemers.is_empty() || self.inputs.values().any(|(_, r)| r.is_some())
    }
}
