//! Redeemers of the `ganglion` validator, with exact PlutusData codecs.
//!
//! Spend (constructor index): `Assign` 0, `Settle` 1, `Cancel` 2, `Expire` 3, `Unbond` 4,
//! `Withdraw` 5, `Slash` 6. Mint: `LockJob` 0, `PostBond` 1, `Burn` 2.

use pallas_primitives::PlutusData;

use crate::data::{self, bytes, constr, int, list, malformed};
use crate::datum::{Assignment, JobId};
use crate::error::Result;
pub use crate::tx::Purpose;
pub use crate::v2::redeemer::MintRedeemer;

/// A provider's claim at the end of a job, signed by its attest key over
/// [`crate::signed::AttestationBody`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Attestation {
    /// Index of the provider in the escrow's assignments.
    pub provider_index: u64,
    /// CID bytes of the pinned outputs.
    #[serde(with = "hex::serde")]
    pub result: Vec<u8>,
    /// CID bytes of the pinned logs.
    #[serde(with = "hex::serde")]
    pub logs: Vec<u8>,
    /// GPU-seconds used (GPUs held × wall seconds).
    pub gpu_seconds: u64,
    /// Exit code of the provider's container.
    pub exit_code: i64,
    /// ed25519 signature (64 bytes).
    #[serde(with = "hex::serde")]
    pub signature: Vec<u8>,
}

impl Attestation {
    /// PlutusData: constructor 0 `[provider_index, result, logs, gpu_seconds, exit_code,
    /// signature]`.
    pub fn to_plutus_data(&self) -> PlutusData {
        constr(
            0,
            vec![
                int(self.provider_index),
                bytes(self.result.clone()),
                bytes(self.logs.clone()),
                int(self.gpu_seconds),
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
        let mut f = data::record("Attestation", d, 0, 6)?;
        Ok(Self {
            provider_index: f.uint("provider_index")?,
            result: f.bytes("result")?,
            logs: f.bytes("logs")?,
            gpu_seconds: f.uint("gpu_seconds")?,
            exit_code: i64::try_from(f.int("exit_code")?)
                .map_err(|_| malformed("Attestation", "exit_code out of range"))?,
            signature: f.bytes("signature")?,
        })
    }
}

/// Spend redeemers: escrow actions and bond actions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SpendRedeemer {
    /// Escrow Open → Assigned; `acceptances[i]` (64-byte signatures) accepts `assignments[i]`.
    Assign {
        /// The providers.
        assignments: Vec<Assignment>,
        /// Their acceptance signatures, in the same order.
        acceptances: Vec<Vec<u8>>,
    },
    /// Pay every provider and refund the rest, before the deadline.
    Settle {
        /// One per assignment, in assignment order.
        attestations: Vec<Attestation>,
    },
    /// Refund an open escrow (orchestrator signs).
    Cancel,
    /// After the deadline: pay the attested, refund the rest, slash defaulters.
    Expire {
        /// Strictly increasing `provider_index`.
        attestations: Vec<Attestation>,
    },
    /// Start a bond's unbonding clock.
    Unbond,
    /// Take a bond back after the unbonding delay.
    Withdraw,
    /// Slash a bond together with the `Expire` of job `job_id`.
    Slash {
        /// The expired job.
        job_id: JobId,
    },
}

impl SpendRedeemer {
    /// The redeemer as PlutusData.
    pub fn to_plutus_data(&self) -> PlutusData {
        let atts = |a: &[Attestation]| list(a.iter().map(Attestation::to_plutus_data).collect());
        match self {
            Self::Assign {
                assignments,
                acceptances,
            } => constr(
                0,
                vec![
                    list(assignments.iter().map(Assignment::to_plutus_data).collect()),
                    list(acceptances.iter().map(|s| bytes(s.clone())).collect()),
                ],
            ),
            Self::Settle { attestations } => constr(1, vec![atts(attestations)]),
            Self::Cancel => constr(2, vec![]),
            Self::Expire { attestations } => constr(3, vec![atts(attestations)]),
            Self::Unbond => constr(4, vec![]),
            Self::Withdraw => constr(5, vec![]),
            Self::Slash { job_id } => constr(6, vec![bytes(job_id.0)]),
        }
    }

    /// Decodes a spend redeemer (the indexer reads them from transactions).
    ///
    /// # Errors
    /// [`crate::Error::MalformedData`] on any other shape.
    pub fn from_plutus_data(d: &PlutusData) -> Result<Self> {
        let (index, mut f) = data::fields("SpendRedeemer", d)?;
        let atts = |l: &[PlutusData]| {
            l.iter()
                .map(Attestation::from_plutus_data)
                .collect::<Result<Vec<_>>>()
        };
        Ok(match index {
            0 => Self::Assign {
                assignments: f
                    .list("assignments")?
                    .iter()
                    .map(Assignment::from_plutus_data)
                    .collect::<Result<_>>()?,
                acceptances: f
                    .list("acceptances")?
                    .iter()
                    .map(|s| match s {
                        PlutusData::BoundedBytes(b) => Ok(b.to_vec()),
                        _ => Err(malformed("SpendRedeemer", "acceptance: expected bytes")),
                    })
                    .collect::<Result<_>>()?,
            },
            1 => Self::Settle {
                attestations: atts(f.list("attestations")?)?,
            },
            2 => Self::Cancel,
            3 => Self::Expire {
                attestations: atts(f.list("attestations")?)?,
            },
            4 => Self::Unbond,
            5 => Self::Withdraw,
            6 => Self::Slash {
                job_id: JobId(f.fixed("job_id")?),
            },
            i => return Err(malformed("SpendRedeemer", format!("constructor {i}"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{from_cbor, to_cbor};

    #[test]
    fn spend_redeemers_round_trip() {
        let att = Attestation {
            provider_index: 1,
            result: vec![1, 85],
            logs: vec![1, 112],
            gpu_seconds: 7200,
            exit_code: -1,
            signature: vec![9; 64],
        };
        let cases = vec![
            SpendRedeemer::Assign {
                assignments: vec![Assignment {
                    provider: [1; 28],
                    attest_key: [2; 32],
                    gpus: 2,
                    rate: 10,
                }],
                acceptances: vec![vec![3; 64]],
            },
            SpendRedeemer::Settle {
                attestations: vec![att.clone()],
            },
            SpendRedeemer::Cancel,
            SpendRedeemer::Expire {
                attestations: vec![att],
            },
            SpendRedeemer::Unbond,
            SpendRedeemer::Withdraw,
            SpendRedeemer::Slash {
                job_id: JobId([4; 32]),
            },
        ];
        for (i, r) in cases.into_iter().enumerate() {
            let d = from_cbor("redeemer", &to_cbor(&r.to_plutus_data())).unwrap();
            assert_eq!(data::fields("r", &d).unwrap().0, i as u64);
            assert_eq!(SpendRedeemer::from_plutus_data(&d).unwrap(), r);
        }
    }
}
