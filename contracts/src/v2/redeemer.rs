//! Redeemers of the `ganglion_v2` validator, with exact PlutusData codecs.
//!
//! Spend (constructor index): `Assign` 0, `Claim` 1, `Cancel` 2, `Expire` 3, `Unbond` 4,
//! `Withdraw` 5, `Slash` 6, `Commit` 7, `Release` 8, `TopUp` 9, `Rescale` 10. Mint: `LockJob`
//! 0, `PostBond` 1, `Burn` 2.

use pallas_primitives::PlutusData;

use crate::data::{self, bytes, constr, int, list, malformed, option};
use crate::error::Result;
pub use crate::tx::Purpose;
use crate::tx::TxoRef;
use crate::v2::datum::JobId;

/// Mint redeemers of the `ganglion_v2` policy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MintRedeemer {
    /// Mint the thread token of the escrow created by consuming `seed`.
    LockJob {
        /// The input whose reference determines the job id.
        seed: TxoRef,
    },
    /// Mint a bond token.
    PostBond,
    /// Burn tokens of this policy.
    Burn,
}

impl MintRedeemer {
    /// The redeemer as PlutusData.
    pub fn to_plutus_data(&self) -> PlutusData {
        match self {
            Self::LockJob { seed } => constr(0, vec![seed.to_plutus_data()]),
            Self::PostBond => constr(1, vec![]),
            Self::Burn => constr(2, vec![]),
        }
    }
}

/// A provider's attestation of its work, signed by its attest key over
/// [`crate::v2::signed::AttestationBody`]; carried by the `Claim` redeemer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Attestation {
    /// CID bytes of the pinned outputs.
    #[serde(with = "hex::serde")]
    pub result: Vec<u8>,
    /// CID bytes of the pinned logs.
    #[serde(with = "hex::serde")]
    pub logs: Vec<u8>,
    /// GPU-milliseconds used (GPUs held × wall milliseconds).
    pub gpu_ms: u64,
    /// Exit code of the provider's container.
    pub exit_code: i64,
    /// ed25519 signature (64 bytes).
    #[serde(with = "hex::serde")]
    pub signature: Vec<u8>,
}

impl Attestation {
    /// PlutusData: constructor 0 `[result, logs, gpu_ms, exit_code, signature]`.
    pub fn to_plutus_data(&self) -> PlutusData {
        constr(
            0,
            vec![
                bytes(self.result.clone()),
                bytes(self.logs.clone()),
                int(self.gpu_ms),
                int(self.exit_code),
                bytes(self.signature.clone()),
            ],
        )
    }

    /// Decodes an attestation.
    ///
    /// # Errors
    /// [`crate::Error::MalformedData`] on any other shape.
    pub fn from_plutus_data(d: &PlutusData) -> Result<Self> {
        let mut f = data::record("Attestation", d, 0, 5)?;
        Ok(Self {
            result: f.bytes("result")?,
            logs: f.bytes("logs")?,
            gpu_ms: f.uint("gpu_ms")?,
            exit_code: i64::try_from(f.int("exit_code")?)
                .map_err(|_| malformed("Attestation", "exit_code out of range"))?,
            signature: f.bytes("signature")?,
        })
    }
}

/// An orchestrator's receipt as a claim carries it: the acknowledged time and the receipt
/// key's signature over [`crate::v2::signed::Receipt`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SignedReceipt {
    /// POSIX ms up to which the orchestrator acknowledged the provider's work.
    pub acknowledged_until_ms: u64,
    /// ed25519 signature (64 bytes) by the escrow's receipt key.
    #[serde(with = "hex::serde")]
    pub signature: Vec<u8>,
}

impl SignedReceipt {
    /// PlutusData: constructor 0 `[acknowledged_until, signature]`.
    pub fn to_plutus_data(&self) -> PlutusData {
        constr(
            0,
            vec![
                int(self.acknowledged_until_ms),
                bytes(self.signature.clone()),
            ],
        )
    }

    /// Decodes a receipt.
    ///
    /// # Errors
    /// [`crate::Error::MalformedData`] on any other shape.
    pub fn from_plutus_data(d: &PlutusData) -> Result<Self> {
        let mut f = data::record("SignedReceipt", d, 0, 2)?;
        Ok(Self {
            acknowledged_until_ms: f.uint("acknowledged_until")?,
            signature: f.bytes("signature")?,
        })
    }
}

/// Spend redeemers: escrow actions and bond actions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SpendRedeemer {
    /// Escrow Open → Assigned; `acceptances[i]` (64-byte signatures) accepts `assignments[i]`
    /// of the continuing escrow's datum (the validator reads the assignments from there).
    Assign {
        /// The providers' acceptance signatures, in the order of the continuing escrow's
        /// assignments.
        acceptances: Vec<Vec<u8>>,
    },
    /// Pay assignment `index` for its attested GPU time, bounded by its best receipt and the
    /// time provably elapsed (DESIGN §3.1 G1); anyone may submit it.
    Claim {
        /// Index into the escrow's assignments.
        index: u64,
        /// The provider's signed attestation.
        attestation: Attestation,
        /// The orchestrator's latest receipt for this provider, if it has one.
        receipt: Option<SignedReceipt>,
    },
    /// Refund an open escrow (orchestrator signs).
    Cancel,
    /// After the deadline and the claim window: refund the unpaid rest, slash the bonds of
    /// assigned providers that never claimed (spent in the same transaction).
    Expire,
    /// Start a bond's unbonding clock.
    Unbond,
    /// Take a bond back after the unbonding delay.
    Withdraw,
    /// Slash a bond together with the `Expire` of job `job_id`.
    Slash {
        /// The expired job.
        job_id: JobId,
    },
    /// Commit a bond to an assignment of job `job_id`, spent beside the escrow's `Assign`
    /// (DESIGN §3.1 G5).
    Commit {
        /// The job being assigned.
        job_id: JobId,
    },
    /// Drop a bond's commitment to job `job_id`, spent beside that job's escrow under the
    /// provider's own `Claim` (DESIGN §3.2: a bond's capacity is freed by the job's claim);
    /// the provider signs.
    Release {
        /// The job claimed.
        job_id: JobId,
    },
    /// Add NTX to a live bond's stake (the provider signs; the datum is unchanged), e.g. back
    /// above `min_bond_per_gpu × gpus` after a slash.
    TopUp,
    /// Escrow Assigned → Assigned (orchestrator signs): the continuing escrow's assignments
    /// are the old ones, some released (an earlier `until`), then the added ones;
    /// `acceptances[j]` (64-byte signatures) accepts the j-th added assignment.
    Rescale {
        /// The added providers' acceptance signatures, in the order they are added.
        acceptances: Vec<Vec<u8>>,
    },
}

impl SpendRedeemer {
    /// The redeemer as PlutusData.
    pub fn to_plutus_data(&self) -> PlutusData {
        match self {
            Self::Assign { acceptances } => constr(0, vec![signatures(acceptances)]),
            Self::Claim {
                index,
                attestation,
                receipt,
            } => constr(
                1,
                vec![
                    int(*index),
                    attestation.to_plutus_data(),
                    option(receipt.as_ref().map(SignedReceipt::to_plutus_data)),
                ],
            ),
            Self::Cancel => constr(2, vec![]),
            Self::Expire => constr(3, vec![]),
            Self::Unbond => constr(4, vec![]),
            Self::Withdraw => constr(5, vec![]),
            Self::Slash { job_id } => constr(6, vec![bytes(job_id.0)]),
            Self::Commit { job_id } => constr(7, vec![bytes(job_id.0)]),
            Self::Release { job_id } => constr(8, vec![bytes(job_id.0)]),
            Self::TopUp => constr(9, vec![]),
            Self::Rescale { acceptances } => constr(10, vec![signatures(acceptances)]),
        }
    }

    /// Decodes a spend redeemer (the indexer reads them from transactions).
    ///
    /// # Errors
    /// [`crate::Error::MalformedData`] on any other shape.
    pub fn from_plutus_data(d: &PlutusData) -> Result<Self> {
        let (index, mut f) = data::fields("SpendRedeemer", d)?;
        Ok(match index {
            0 => Self::Assign {
                acceptances: signatures_of(f.list("acceptances")?)?,
            },
            1 => {
                let index = f.uint("index")?;
                let attestation = Attestation::from_plutus_data(f.next_data("attestation")?)?;
                let (some, mut o) = data::fields("Option", f.next_data("receipt")?)?;
                let receipt = match some {
                    0 => Some(SignedReceipt::from_plutus_data(o.next_data("receipt")?)?),
                    1 => None,
                    i => return Err(malformed("Option", format!("constructor {i}"))),
                };
                Self::Claim {
                    index,
                    attestation,
                    receipt,
                }
            }
            2 => Self::Cancel,
            3 => Self::Expire,
            4 => Self::Unbond,
            5 => Self::Withdraw,
            6 => Self::Slash {
                job_id: JobId(f.fixed("job_id")?),
            },
            7 => Self::Commit {
                job_id: JobId(f.fixed("job_id")?),
            },
            8 => Self::Release {
                job_id: JobId(f.fixed("job_id")?),
            },
            9 => Self::TopUp,
            10 => Self::Rescale {
                acceptances: signatures_of(f.list("acceptances")?)?,
            },
            i => return Err(malformed("SpendRedeemer", format!("constructor {i}"))),
        })
    }
}

/// A list of signatures (acceptances) as PlutusData: a list of bytestrings.
fn signatures(acceptances: &[Vec<u8>]) -> PlutusData {
    list(acceptances.iter().map(|s| bytes(s.clone())).collect())
}

fn signatures_of(items: &[PlutusData]) -> Result<Vec<Vec<u8>>> {
    items
        .iter()
        .map(|s| match s {
            PlutusData::BoundedBytes(b) => Ok(b.to_vec()),
            _ => Err(malformed("SpendRedeemer", "acceptance: expected bytes")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{from_cbor, to_cbor};

    #[test]
    fn spend_redeemers_round_trip() {
        let att = Attestation {
            result: vec![1, 85],
            logs: vec![1, 112],
            gpu_ms: 7_200_000,
            exit_code: -1,
            signature: vec![9; 64],
        };
        let cases = vec![
            SpendRedeemer::Assign {
                acceptances: vec![vec![3; 64]],
            },
            SpendRedeemer::Claim {
                index: 1,
                attestation: att.clone(),
                receipt: Some(SignedReceipt {
                    acknowledged_until_ms: 1_700_000_000_000,
                    signature: vec![5; 64],
                }),
            },
            SpendRedeemer::Cancel,
            SpendRedeemer::Expire,
            SpendRedeemer::Unbond,
            SpendRedeemer::Withdraw,
            SpendRedeemer::Slash {
                job_id: JobId([4; 32]),
            },
            SpendRedeemer::Commit {
                job_id: JobId([6; 32]),
            },
            SpendRedeemer::Release {
                job_id: JobId([8; 32]),
            },
            SpendRedeemer::TopUp,
            SpendRedeemer::Rescale {
                acceptances: vec![vec![7; 64], vec![8; 64]],
            },
        ];
        let unreceipted = SpendRedeemer::Claim {
            index: 0,
            attestation: att,
            receipt: None,
        };
        let d = from_cbor("redeemer", &to_cbor(&unreceipted.to_plutus_data())).unwrap();
        assert_eq!(SpendRedeemer::from_plutus_data(&d).unwrap(), unreceipted);
        for (i, r) in cases.into_iter().enumerate() {
            let d = from_cbor("redeemer", &to_cbor(&r.to_plutus_data())).unwrap();
            assert_eq!(data::fields("r", &d).unwrap().0, i as u64);
            assert_eq!(SpendRedeemer::from_plutus_data(&d).unwrap(), r);
        }
    }

    #[test]
    fn a_rescale_is_constructor_10_with_its_acceptances() {
        let r = SpendRedeemer::Rescale {
            acceptances: vec![vec![1; 64]],
        };
        assert_eq!(
            r.to_plutus_data(),
            constr(10, vec![list(vec![bytes(vec![1; 64])])])
        );
        let not_bytes = constr(10, vec![list(vec![int(1)])]);
        assert!(SpendRedeemer::from_plutus_data(&not_bytes).is_err());
        assert!(SpendRedeemer::from_plutus_data(&constr(11, vec![])).is_err());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn assigns_and_rescales_round_trip_through_cbor(
                acceptances in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..80), 0..9),
                rescale in any::<bool>(),
            ) {
                let r = if rescale {
                    SpendRedeemer::Rescale { acceptances }
                } else {
                    SpendRedeemer::Assign { acceptances }
                };
                let d = from_cbor("redeemer", &to_cbor(&r.to_plutus_data())).unwrap();
                prop_assert_eq!(SpendRedeemer::from_plutus_data(&d).unwrap(), r);
            }

            #[test]
            fn arbitrary_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
                if let Ok(d) = from_cbor("redeemer", &bytes) {
                    let _ = SpendRedeemer::from_plutus_data(&d);
                }
            }
        }
    }
}
