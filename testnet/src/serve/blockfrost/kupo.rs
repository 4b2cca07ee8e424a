//! Kupo's `/matches/{pattern}` over the devnet's UTxO set (Kupo 2.x patterns and match
//! objects, as a Kupo run with `--prune-utxo` answers: only unspent outputs are kept, so
//! `?spent` matches nothing).
//!
//! Patterns: `*`; a bech32 address (`addr_test1…`); `{payment}/{delegation}` credentials,
//! each 28 bytes of hex or `*`; `{policy id}.{asset name}` or `{policy id}.*`;
//! `{output index}@{transaction id}` or `*@{transaction id}`.

use pallas_addresses::Address;
use pallas_crypto::hash::Hash;
use serde_json::{Value as Json, json};

use ganglion_cardano::txo::TxoRef;

use super::render::Output;

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
    /// Whether the output `raw` at `r` matches.
    pub fn matches(&self, r: &TxoRef, address: &[u8], out: &Output) -> bool {
        match self {
            Self::Any => true,
            Self::Address(a) => a == address,
            Self::Credentials {
                payment,
                delegation,
            } => match Address::from_bytes(address) {
                Ok(Address::Shelley(a)) => {
                    payment.is_none_or(|p| *a.payment().as_hash() == p)
                        && delegation.is_none_or(|d| a.delegation().as_hash() == Some(&d))
                }
                _ => false,
            },
            Self::Asset { policy, name } => out
                .value
                .assets
                .keys()
                .any(|(p, n)| p == policy && name.as_ref().is_none_or(|want| want == n)),
            Self::OutputRef { tx_hash, index } => {
                r.tx_hash == *tx_hash && index.is_none_or(|i| i == r.index)
            }
        }
    }
}

/// Where an output was created: slot, header hash and the transaction's position in its
/// block (`None` for a genesis output, which no block carries: slot 0, no header).
pub type Created = Option<(u64, Hash<32>, u32)>;

/// Kupo's match object for the unspent output `r`.
pub fn match_json(r: &TxoRef, out: &Output, created: Created) -> Json {
    let assets: serde_json::Map<String, Json> = out
        .value
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
    let mut m = json!({
        "transaction_index": created.map_or(0, |(_, _, i)| i),
        "transaction_id": hex::encode(r.tx_hash),
        "output_index": r.index,
        "address": out.address,
        "value": { "coins": out.value.coin, "assets": assets },
        "datum_hash": out.data_hash.map(|h| h.to_string()),
        "script_hash": out.script_hash.map(|h| h.to_string()),
        "created_at": {
            "slot_no": created.map_or(0, |(s, _, _)| s),
            "header_hash": created.map(|(_, h, _)| h.to_string()),
        },
        "spent_at": null,
    });
    if out.data_hash.is_some() {
        m["datum_type"] = json!(if out.inline_datum.is_some() {
            "inline"
        } else {
            "hash"
        });
    }
    m
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
