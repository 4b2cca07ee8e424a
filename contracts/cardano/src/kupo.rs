//! Kupo's `/matches/{pattern}`: its patterns and its match objects (Kupo 2.x), for the HTTP
//! APIs that answer them over unspent outputs — the devnet's over its whole UTxO set, the
//! index's over the escrows and bonds it follows — as a Kupo run with `--prune-utxo` answers
//! (spent outputs are not kept, so `?spent` matches nothing).
//!
//! Patterns: `*`; a bech32 address (`addr_test1…`) or stake address (its delegation part);
//! `{payment}/{delegation}` credentials, each 28 bytes of hex or `*`;
//! `{policy id}.{asset name}` or `{policy id}.*`; `{output index}@{transaction id}` or
//! `*@{transaction id}`.

use std::collections::BTreeMap;

use pallas_addresses::Address;
use pallas_crypto::hash::Hash;
use serde_json::{Value as Json, json};

use crate::txo::TxoRef;

/// An unspent output as a match shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// Where it is.
    pub reference: TxoRef,
    /// Raw address bytes.
    pub address: Vec<u8>,
    /// Lovelace.
    pub coins: u64,
    /// Native assets by (policy id, asset name).
    pub assets: BTreeMap<(Vec<u8>, Vec<u8>), u64>,
    /// The datum's hash (for an inline datum, blake2b-256 of its CBOR).
    pub datum_hash: Option<[u8; 32]>,
    /// Whether the datum is inline (else only its hash is on the output).
    pub inline_datum: bool,
    /// The reference script's hash.
    pub script_hash: Option<[u8; 28]>,
    /// Where it was created: `None` for a genesis output, which no block carries.
    pub created: Option<Created>,
}

/// The block and position of the transaction that created an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// Slot of the block.
    pub slot: u64,
    /// Header hash of the block.
    pub header_hash: [u8; 32],
    /// Position of the transaction in the block.
    pub tx_index: u32,
}

/// A parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// Every output.
    Any,
    /// Outputs at exactly this address (raw bytes).
    Address(Vec<u8>),
    /// Outputs whose payment and/or delegation credential is this one (`None` = any).
    Credentials {
        /// Payment key or script hash.
        payment: Option<Hash<28>>,
        /// Stake key or script hash.
        delegation: Option<Hash<28>>,
    },
    /// Outputs holding an asset of `policy` (named `name`, or any name when `None`).
    Asset {
        /// Policy id.
        policy: Vec<u8>,
        /// Asset name.
        name: Option<Vec<u8>>,
    },
    /// One transaction's outputs (at `index`, or all when `None`).
    OutputRef {
        /// Transaction id.
        tx_hash: [u8; 32],
        /// Output index.
        index: Option<u64>,
    },
}

fn credential(s: &str) -> Result<Option<Hash<28>>, String> {
    if s == "*" {
        return Ok(None);
    }
    let bytes: [u8; 28] = hex::decode(s)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("{s:?} is neither * nor a 28-byte credential in hex"))?;
    Ok(Some(Hash::new(bytes)))
}

impl std::str::FromStr for Pattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "*" || s == "*/*" {
            return Ok(Self::Any);
        }
        if let Some((index, tx)) = s.split_once('@') {
            let tx_hash: [u8; 32] = hex::decode(tx)
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| format!("{tx:?} is not a 32-byte transaction id in hex"))?;
            let index = match index {
                "*" => None,
                n => Some(
                    n.parse()
                        .map_err(|_| format!("{n:?} is not an output index"))?,
                ),
            };
            return Ok(Self::OutputRef { tx_hash, index });
        }
        if let Some((policy, name)) = s.split_once('.') {
            let policy = hex::decode(policy)
                .ok()
                .filter(|p| p.len() == 28)
                .ok_or_else(|| format!("{policy:?} is not a 28-byte policy id in hex"))?;
            let name = match name {
                "*" => None,
                n => {
                    Some(hex::decode(n).map_err(|_| format!("{n:?} is not an asset name in hex"))?)
                }
            };
            return Ok(Self::Asset { policy, name });
        }
        if let Some((payment, delegation)) = s.split_once('/') {
            return Ok(Self::Credentials {
                payment: credential(payment)?,
                delegation: credential(delegation)?,
            });
        }
        match Address::from_bech32(s) {
            Ok(Address::Stake(a)) => Ok(Self::Credentials {
                payment: None,
                delegation: Some(*a.payload().as_hash()),
            }),
            Ok(a) => Ok(Self::Address(a.to_vec())),
            Err(_) => Err(format!("{s:?} is not a Kupo pattern")),
        }
    }
}

impl Pattern {
    /// Whether `m` matches.
    pub fn matches(&self, m: &Match) -> bool {
        let r = &m.reference;
        match self {
            Self::Any => true,
            Self::Address(a) => *a == m.address,
            Self::Credentials {
                payment,
                delegation,
            } => match Address::from_bytes(&m.address) {
                Ok(Address::Shelley(a)) => {
                    payment.is_none_or(|p| *a.payment().as_hash() == p)
                        && delegation.is_none_or(|d| a.delegation().as_hash() == Some(&d))
                }
                _ => false,
            },
            Self::Asset { policy, name } => m
                .assets
                .keys()
                .any(|(p, n)| p == policy && name.as_ref().is_none_or(|want| want == n)),
            Self::OutputRef { tx_hash, index } => {
                r.tx_hash == *tx_hash && index.is_none_or(|i| i == r.index)
            }
        }
    }
}

/// The query parameters of `/matches` this API reads (`?spent`, `?unspent`, `?order=`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct MatchQuery {
    /// Present: only spent outputs (none are kept, so the answer is empty).
    pub spent: Option<String>,
    /// Present: only unspent outputs (all of them).
    pub unspent: Option<String>,
    /// `most_recent_first` (default) or `oldest_first`.
    pub order: Option<String>,
}

/// The order of `/matches` (`?order=`): `most_recent_first` (the default) or `oldest_first`.
///
/// # Errors
/// The message for another value.
pub fn oldest_first(order: Option<&str>) -> Result<bool, String> {
    match order {
        None | Some("most_recent_first") => Ok(false),
        Some("oldest_first") => Ok(true),
        Some(o) => Err(format!(
            "order must be most_recent_first or oldest_first, not {o:?}"
        )),
    }
}

/// The matches of `pattern` among `outputs`, ordered by creation (slot, then position in
/// the block, then output index; genesis outputs oldest), most recent first unless
/// `oldest_first`: Kupo's answer as a JSON array.
pub fn answer(pattern: &Pattern, outputs: Vec<Match>, oldest_first: bool) -> Json {
    let mut found: Vec<Match> = outputs.into_iter().filter(|m| pattern.matches(m)).collect();
    found.sort_by_key(|m| {
        (
            m.created.map(|c| (c.slot, c.tx_index)),
            m.reference.index,
            m.reference.tx_hash,
        )
    });
    if !oldest_first {
        found.reverse();
    }
    Json::Array(found.iter().map(Match::to_json).collect())
}

impl Match {
    /// Kupo's match object.
    pub fn to_json(&self) -> Json {
        let assets: serde_json::Map<String, Json> = self
            .assets
            .iter()
            .map(|((p, n), q)| {
                let unit = if n.is_empty() {
                    hex::encode(p)
                } else {
                    format!("{}.{}", hex::encode(p), hex::encode(n))
                };
                (unit, json!(q))
            })
            .collect();
        let address = Address::from_bytes(&self.address)
            .ok()
            .and_then(|a| a.to_bech32().ok())
            .unwrap_or_else(|| hex::encode(&self.address));
        let mut m = json!({
            "transaction_index": self.created.map_or(0, |c| c.tx_index),
            "transaction_id": hex::encode(self.reference.tx_hash),
            "output_index": self.reference.index,
            "address": address,
            "value": { "coins": self.coins, "assets": assets },
            "datum_hash": self.datum_hash.map(hex::encode),
            "script_hash": self.script_hash.map(hex::encode),
            "created_at": {
                "slot_no": self.created.map_or(0, |c| c.slot),
                "header_hash": self.created.map(|c| hex::encode(c.header_hash)),
            },
            "spent_at": null,
        });
        if self.datum_hash.is_some() {
            m["datum_type"] = json!(if self.inline_datum { "inline" } else { "hash" });
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_parse_as_kupo_reads_them() {
        let id = "ab".repeat(32);
        let cred = "cd".repeat(28);
        assert_eq!("*".parse(), Ok(Pattern::Any));
        assert_eq!(
            format!("3@{id}").parse(),
            Ok(Pattern::OutputRef {
                tx_hash: [0xab; 32],
                index: Some(3)
            })
        );
        assert_eq!(
            format!("*@{id}").parse(),
            Ok(Pattern::OutputRef {
                tx_hash: [0xab; 32],
                index: None
            })
        );
        assert_eq!(
            format!("{cred}/*").parse(),
            Ok(Pattern::Credentials {
                payment: Some(Hash::new([0xcd; 28])),
                delegation: None
            })
        );
        assert_eq!(
            format!("{cred}.4e5458").parse(),
            Ok(Pattern::Asset {
                policy: vec![0xcd; 28],
                name: Some(b"NTX".to_vec())
            })
        );
        for bad in [
            "",
            "addr_test1nope",
            "x@y",
            "zz.*",
            "12/34",
            &format!("-1@{id}"),
        ] {
            assert!(bad.parse::<Pattern>().is_err(), "{bad:?} parsed");
        }
    }
}
