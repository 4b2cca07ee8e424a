//! Values and outputs, and their ledger CBOR; output references are
//! `ganglion_cardano::txo::TxoRef`.

use std::collections::BTreeMap;

use ganglion_cardano::txo::TxoRef;
use pallas_primitives::PlutusData;

use crate::params::{AssetClass, PolicyId};

/// Lovelace plus native assets (policy → asset name → quantity). Zero quantities are never
/// stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Value {
    /// Lovelace.
    pub lovelace: u64,
    /// Native assets.
    pub assets: BTreeMap<PolicyId, BTreeMap<Vec<u8>, u64>>,
}

impl Value {
    /// Only lovelace.
    pub fn lovelace(lovelace: u64) -> Self {
        Self {
            lovelace,
            assets: BTreeMap::new(),
        }
    }

    /// Adds `quantity` of `asset` (builder style).
    pub fn with(mut self, policy: PolicyId, name: &[u8], quantity: u64) -> Self {
        self.add_asset(policy, name, quantity);
        self
    }

    /// Adds `quantity` of an asset class.
    pub fn with_class(self, asset: &AssetClass, quantity: u64) -> Self {
        self.with(asset.policy, &asset.name, quantity)
    }

    /// Adds `quantity` of an asset (no-op for 0).
    pub fn add_asset(&mut self, policy: PolicyId, name: &[u8], quantity: u64) {
        if quantity > 0 {
            *self
                .assets
                .entry(policy)
                .or_default()
                .entry(name.to_vec())
                .or_default() += quantity;
        }
    }

    /// Removes `quantity` of an asset, dropping entries that reach 0. Returns `false` (and
    /// changes nothing) when the value holds less than `quantity`.
    pub fn take_asset(&mut self, policy: &PolicyId, name: &[u8], quantity: u64) -> bool {
        if quantity == 0 {
            return true;
        }
        let Some(names) = self.assets.get_mut(policy) else {
            return false;
        };
        let Some(q) = names.get_mut(name) else {
            return false;
        };
        if *q < quantity {
            return false;
        }
        *q -= quantity;
        if *q == 0 {
            names.remove(name);
        }
        if names.is_empty() {
            self.assets.remove(policy);
        }
        true
    }

    /// Quantity of one asset (0 when absent).
    pub fn quantity(&self, policy: &PolicyId, name: &[u8]) -> u64 {
        self.assets
            .get(policy)
            .and_then(|a| a.get(name))
            .copied()
            .unwrap_or(0)
    }

    /// Quantity of an asset class.
    pub fn quantity_of(&self, asset: &AssetClass) -> u64 {
        self.quantity(&asset.policy, &asset.name)
    }

    /// True when the value holds no native asset.
    pub fn is_pure_ada(&self) -> bool {
        self.assets.is_empty()
    }

    /// Every asset as `(policy, name, quantity)`.
    pub fn iter_assets(&self) -> impl Iterator<Item = (PolicyId, &[u8], u64)> + '_ {
        self.assets
            .iter()
            .flat_map(|(p, m)| m.iter().map(move |(n, q)| (*p, n.as_slice(), *q)))
    }
}

/// A transaction output: address bytes, value, optional inline datum, optional Plutus V3
/// reference script (flat program in one CBOR bytestring, as in a blueprint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Raw address bytes (CIP-19 header + credentials).
    pub address: Vec<u8>,
    /// Lovelace and assets.
    pub value: Value,
    /// Inline datum.
    pub datum: Option<PlutusData>,
    /// Plutus V3 reference script.
    pub script_ref: Option<Vec<u8>>,
}

impl Output {
    /// An output with no datum and no script.
    pub fn new(address: Vec<u8>, value: Value) -> Self {
        Self {
            address,
            value,
            datum: None,
            script_ref: None,
        }
    }

    /// With an inline datum.
    pub fn with_datum(mut self, datum: PlutusData) -> Self {
        self.datum = Some(datum);
        self
    }
}

/// An unspent output and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Utxo {
    /// Its reference.
    pub reference: TxoRef,
    /// The output.
    pub output: Output,
}

impl Output {
    /// Reads an output as pallas-traverse sees it on chain (any era): address bytes, value,
    /// inline datum, Plutus V3 reference script. Datum hashes and other script kinds are
    /// dropped (Ganglion's outputs use neither).
    pub fn from_chain(o: &pallas_traverse::MultiEraOutput<'_>) -> Self {
        let mut value = Value::lovelace(o.value().coin());
        for policy in o.value().assets() {
            for asset in policy.assets() {
                if let Some(q) = asset.output_coin() {
                    value.add_asset(**policy.policy(), asset.name(), q);
                }
            }
        }
        let datum = match o.datum() {
            Some(pallas_primitives::conway::DatumOption::Data(d)) => Some(d.0.clone().unwrap()),
            _ => None,
        };
        let script_ref = match o.script_ref() {
            Some(pallas_primitives::conway::ScriptRef::PlutusV3Script(s)) => Some(s.0.to_vec()),
            _ => None,
        };
        Self {
            address: o.address().map(|a| a.to_vec()).unwrap_or_default(),
            value,
            datum,
            script_ref,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{bytes, constr, int, list};

    #[test]
    fn an_output_reference_is_the_v3_txoutref_the_data_helpers_build() {
        let r = TxoRef {
            tx_hash: [3; 32],
            index: 258,
        };
        assert_eq!(
            r.to_plutus_data(),
            constr(0, vec![bytes(r.tx_hash), int(r.index)])
        );
    }

    #[test]
    fn outputs_read_back_from_chain_bytes_are_equal() {
        let o = Output {
            address: vec![0x70; 29],
            value: Value::lovelace(2_000_000)
                .with([1; 28], b"NTX", 5)
                .with([2; 28], &[9; 32], 1),
            datum: Some(list(vec![int(7), bytes(vec![1, 2])])),
            script_ref: Some(vec![0x46, 1, 2, 3, 4, 5, 6]),
        };
        let cbor = crate::tx::encode_output(&o).unwrap();
        let chain =
            pallas_traverse::MultiEraOutput::decode(pallas_traverse::Era::Conway, &cbor).unwrap();
        assert_eq!(Output::from_chain(&chain), o);
    }
}
