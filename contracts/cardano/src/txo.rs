//! Transaction output references (`TxIn`, `OutputReference`) and their encodings.
//!
//! Shapes, each fixed by its user:
//! - ledger CBOR `[tx_hash: bytes .size 32, index: uint]` (Conway CDDL `transaction_input`);
//! - Plutus V3 `TxOutRef` as PlutusData: constructor 0 `[tx_hash, index]` (plutus-ledger-api
//!   `PlutusLedgerApi.V3.Tx`), in the `serialiseData` encoding (indefinite field list);
//! - serde (JSON): `{"tx_hash": "<64 hex digits>", "index": n}`;
//! - store key: 40 bytes `tx_hash ‖ index` (big endian), sorting by transaction, then index;
//! - text: `<hex tx_hash>#<index>`, as cardano-cli prints a `TxIn`.

use std::fmt;

use pallas_codec::minicbor;
use pallas_codec::utils::{Int, MaybeIndefArray};
use pallas_crypto::hash::Hash;
use pallas_primitives::{BigInt, BoundedBytes, Constr, PlutusData, TransactionInput};

/// A transaction output reference: the transaction's id and the output's index in it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct TxoRef {
    /// Transaction id: blake2b-256 of the transaction body bytes.
    #[serde(with = "hex::serde")]
    pub tx_hash: [u8; 32],
    /// Output index within the transaction.
    pub index: u64,
}

impl TxoRef {
    /// Fixed-width store key: 32-byte id ‖ 8-byte big-endian index (sorts by tx, then index).
    pub fn to_key(&self) -> [u8; 40] {
        let mut k = [0u8; 40];
        k[..32].copy_from_slice(&self.tx_hash);
        k[32..].copy_from_slice(&self.index.to_be_bytes());
        k
    }

    /// Parse a [`TxoRef::to_key`] key; `None` if it is not 40 bytes.
    pub fn from_key(key: &[u8]) -> Option<Self> {
        let (id, idx) = key.split_first_chunk::<32>()?;
        let idx: [u8; 8] = idx.try_into().ok()?;
        Some(Self {
            tx_hash: *id,
            index: u64::from_be_bytes(idx),
        })
    }

    /// The ledger CBOR of this reference: `[tx_hash, index]`.
    pub fn to_cbor(&self) -> Vec<u8> {
        minicbor::to_vec(TransactionInput::from(self)).unwrap_or_default()
    }

    /// PlutusData of a V3 `TxOutRef`: constructor 0 (CBOR tag 121) with the indefinite field
    /// list `[tx_hash, index]`, the encoding `serialiseData` gives on-chain.
    pub fn to_plutus_data(&self) -> PlutusData {
        PlutusData::Constr(Constr {
            tag: 121,
            any_constructor: None,
            fields: MaybeIndefArray::Indef(vec![
                PlutusData::BoundedBytes(BoundedBytes::from(self.tx_hash.to_vec())),
                PlutusData::BigInt(BigInt::Int(Int(minicbor::data::Int::from(self.index)))),
            ]),
        })
    }
}

impl From<&TransactionInput> for TxoRef {
    fn from(i: &TransactionInput) -> Self {
        Self {
            tx_hash: *i.transaction_id,
            index: i.index,
        }
    }
}

impl From<&TxoRef> for TransactionInput {
    fn from(r: &TxoRef) -> Self {
        TransactionInput {
            transaction_id: Hash::new(r.tx_hash),
            index: r.index,
        }
    }
}

impl fmt::Display for TxoRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", hex::encode(self.tx_hash), self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(b: u8, i: u64) -> TxoRef {
        TxoRef {
            tx_hash: [b; 32],
            index: i,
        }
    }

    #[test]
    fn keys_round_trip() {
        let x = r(9, 300);
        assert_eq!(TxoRef::from_key(&x.to_key()), Some(x));
        assert_eq!(TxoRef::from_key(&[0; 3]), None);
        assert_eq!(TxoRef::from_key(&[0; 41]), None);
    }

    #[test]
    fn keys_sort_like_references() {
        let (a, b, c) = (r(1, 2), r(1, 256), r(2, 0));
        assert!(a.to_key() < b.to_key() && b.to_key() < c.to_key());
        assert!(a < b && b < c);
    }

    #[test]
    fn ledger_cbor_is_a_two_element_array() {
        let cbor = r(7, 1).to_cbor();
        // 82 (array 2) 58 20 (bytes 32) … 01
        assert_eq!(&cbor[..3], &[0x82, 0x58, 0x20]);
        assert_eq!(cbor.len(), 3 + 32 + 1);
        let back: TransactionInput = minicbor::decode(&cbor).expect("decodes");
        assert_eq!(TxoRef::from(&back), r(7, 1));
    }

    #[test]
    fn plutus_data_is_constructor_0_of_hash_and_index() {
        let cbor = minicbor::to_vec(r(7, 1).to_plutus_data()).expect("encodes");
        // d8 79 (tag 121) 9f (indefinite list) 58 20 … 01 ff
        assert_eq!(&cbor[..5], &[0xd8, 0x79, 0x9f, 0x58, 0x20]);
        assert_eq!(&cbor[37..], &[0x01, 0xff]);
    }

    #[test]
    fn serde_and_text_use_hex() {
        let x = r(0xab, 3);
        let json = serde_json::to_value(x).expect("json");
        assert_eq!(json["tx_hash"], hex::encode([0xab; 32]));
        assert_eq!(json["index"], 3);
        assert_eq!(serde_json::from_value::<TxoRef>(json).expect("back"), x);
        assert_eq!(x.to_string(), format!("{}#3", hex::encode([0xab; 32])));
    }
}
