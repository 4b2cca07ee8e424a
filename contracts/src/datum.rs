//! Datums at the Ganglion script address, with exact PlutusData codecs.
//!
//! Constructor indices (mirroring `contracts/aiken/lib/ganglion/types.ak`):
//! `GanglionDatum::Escrow` = 0, `GanglionDatum::Bond` = 1; `JobState::Open` = 0,
//! `JobState::Assigned` = 1; `Assignment` = 0; `Option`: `Some` = 0, `None` = 1.

use pallas_primitives::PlutusData;

use crate::data::{self, bytes, constr, int, list, malformed, option};
use crate::error::Result;
use crate::params::KeyHash;
pub use crate::v2::datum::JobId;

/// One provider's share of a job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Assignment {
    /// The provider's payment key hash (payouts go to its address).
    #[serde(with = "hex::serde")]
    pub provider: KeyHash,
    /// The ed25519 key of the provider's bond that signs acceptances and attestations.
    #[serde(with = "hex::serde")]
    pub attest_key: [u8; 32],
    /// GPUs this provider runs.
    pub gpus: u64,
    /// Price in NTX base units per GPU-hour.
    pub rate: u64,
}

impl Assignment {
    /// PlutusData: constructor 0 `[provider, attest_key, gpus, rate]`.
    pub fn to_plutus_data(&self) -> PlutusData {
        constr(
            0,
            vec![
                bytes(self.provider),
                bytes(self.attest_key),
                int(self.gpus),
                int(self.rate),
            ],
        )
    }

    /// Decodes an assignment.
    ///
    /// # Errors
    /// [`crate::Error::MalformedData`] on any other shape.
    pub fn from_plutus_data(d: &PlutusData) -> Result<Self> {
        let mut f = data::record("Assignment", d, 0, 4)?;
        Ok(Self {
            provider: f.fixed("provider")?,
            attest_key: f.fixed("attest_key")?,
            gpus: f.uint("gpus")?,
            rate: f.uint("rate")?,
        })
    }
}

/// Where an escrow stands.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum JobState {
    /// Locked, waiting for providers.
    Open,
    /// Assigned to providers; `started_at_ms` is the POSIX time (ms) of the assign tx's lower
    /// validity bound.
    Assigned {
        /// Providers and their GPUs and rates.
        assignments: Vec<Assignment>,
        /// POSIX ms.
        started_at_ms: u64,
    },
}

/// The datum of a job escrow.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EscrowDatum {
    /// The job id (thread token name).
    pub job_id: JobId,
    /// The orchestrator's payment key hash: signs assign/cancel, receives refunds.
    #[serde(with = "hex::serde")]
    pub orchestrator: KeyHash,
    /// CID bytes of the ensemble spec (binary CID, e.g. CIDv1 raw-leaves).
    #[serde(with = "hex::serde")]
    pub spec: Vec<u8>,
    /// GPUs the job needs in total.
    pub gpus: u64,
    /// Highest acceptable rate, NTX base units per GPU-hour.
    pub max_rate: u64,
    /// NTX base units locked (equals the NTX in the escrow UTxO).
    pub budget: u64,
    /// POSIX ms after which the job can only expire.
    pub deadline_ms: u64,
    /// Open or assigned.
    pub state: JobState,
}

/// The datum of a provider bond.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BondDatum {
    /// The provider's payment key hash; also the bond token's asset name.
    #[serde(with = "hex::serde")]
    pub provider: KeyHash,
    /// ed25519 key that signs acceptances, attestations and offers.
    #[serde(with = "hex::serde")]
    pub attest_key: [u8; 32],
    /// libp2p peer id bytes.
    #[serde(with = "hex::serde")]
    pub peer_id: Vec<u8>,
    /// GPUs the bond backs.
    pub gpus: u64,
    /// POSIX ms when unbonding started, if it did.
    pub unbonding_since_ms: Option<u64>,
}

/// Any datum at the Ganglion script address.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GanglionDatum {
    /// Constructor 0.
    Escrow(EscrowDatum),
    /// Constructor 1.
    Bond(BondDatum),
}

impl GanglionDatum {
    /// PlutusData: `Escrow` = constructor 0 `[job_id, orchestrator, spec, gpus, max_rate,
    /// budget, deadline, state]`; `Bond` = constructor 1 `[provider, attest_key, peer_id, gpus,
    /// unbonding_since]`.
    pub fn to_plutus_data(&self) -> PlutusData {
        match self {
            Self::Escrow(e) => constr(
                0,
                vec![
                    bytes(e.job_id.0),
                    bytes(e.orchestrator),
                    bytes(e.spec.clone()),
                    int(e.gpus),
                    int(e.max_rate),
                    int(e.budget),
                    int(e.deadline_ms),
                    match &e.state {
                        JobState::Open => constr(0, vec![]),
                        JobState::Assigned {
                            assignments,
                            started_at_ms,
                        } => constr(
                            1,
                            vec![
                                list(assignments.iter().map(Assignment::to_plutus_data).collect()),
                                int(*started_at_ms),
                            ],
                        ),
                    },
                ],
            ),
            Self::Bond(b) => constr(
                1,
                vec![
                    bytes(b.provider),
                    bytes(b.attest_key),
                    bytes(b.peer_id.clone()),
                    int(b.gpus),
                    option(b.unbonding_since_ms.map(int)),
                ],
            ),
        }
    }

    /// Decodes a datum found at the script address.
    ///
    /// # Errors
    /// [`crate::Error::MalformedData`] naming the type and field that do not fit.
    pub fn from_plutus_data(d: &PlutusData) -> Result<Self> {
        let (index, mut f) = data::fields("GanglionDatum", d)?;
        match index {
            0 => {
                let job_id = JobId(f.fixed("job_id")?);
                let orchestrator = f.fixed("orchestrator")?;
                let spec = f.bytes("spec")?;
                let gpus = f.uint("gpus")?;
                let max_rate = f.uint("max_rate")?;
                let budget = f.uint("budget")?;
                let deadline_ms = f.uint("deadline")?;
                let (state_index, mut s) = data::fields("JobState", f.next_data("state")?)?;
                let state = match state_index {
                    0 => JobState::Open,
                    1 => JobState::Assigned {
                        assignments: s
                            .list("assignments")?
                            .iter()
                            .map(Assignment::from_plutus_data)
                            .collect::<Result<_>>()?,
                        started_at_ms: s.uint("started_at")?,
                    },
                    i => return Err(malformed("JobState", format!("constructor {i}"))),
                };
                Ok(Self::Escrow(EscrowDatum {
                    job_id,
                    orchestrator,
                    spec,
                    gpus,
                    max_rate,
                    budget,
                    deadline_ms,
                    state,
                }))
            }
            1 => {
                let provider = f.fixed("provider")?;
                let attest_key = f.fixed("attest_key")?;
                let peer_id = f.bytes("peer_id")?;
                let gpus = f.uint("gpus")?;
                let (opt, mut o) = data::fields("Option", f.next_data("unbonding_since")?)?;
                let unbonding_since_ms = match opt {
                    0 => Some(o.uint("unbonding_since")?),
                    1 => None,
                    i => return Err(malformed("Option", format!("constructor {i}"))),
                };
                Ok(Self::Bond(BondDatum {
                    provider,
                    attest_key,
                    peer_id,
                    gpus,
                    unbonding_since_ms,
                }))
            }
            i => Err(malformed("GanglionDatum", format!("constructor {i}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{from_cbor, to_cbor};

    fn escrow(state: JobState) -> GanglionDatum {
        GanglionDatum::Escrow(EscrowDatum {
            job_id: JobId([1; 32]),
            orchestrator: [2; 28],
            spec: vec![1, 85, 18, 32, 9, 9],
            gpus: 4,
            max_rate: 1_000_000,
            budget: 40_000_000,
            deadline_ms: 1_700_000_000_000,
            state,
        })
    }

    #[test]
    fn datums_round_trip_through_cbor() {
        let cases = [
            escrow(JobState::Open),
            escrow(JobState::Assigned {
                assignments: vec![Assignment {
                    provider: [3; 28],
                    attest_key: [4; 32],
                    gpus: 4,
                    rate: 900_000,
                }],
                started_at_ms: 1_699_999_000_000,
            }),
            GanglionDatum::Bond(BondDatum {
                provider: [5; 28],
                attest_key: [6; 32],
                peer_id: vec![0, 36, 8, 1],
                gpus: 8,
                unbonding_since_ms: Some(12),
            }),
        ];
        for d in cases {
            let back = GanglionDatum::from_plutus_data(
                &from_cbor("datum", &to_cbor(&d.to_plutus_data())).unwrap(),
            )
            .unwrap();
            assert_eq!(back, d);
        }
    }

    #[test]
    fn malformed_datums_name_the_field() {
        let mut d = escrow(JobState::Open).to_plutus_data();
        if let PlutusData::Constr(c) = &mut d {
            let mut fields = c.fields.clone().to_vec();
            fields[1] = bytes(vec![1, 2, 3]);
            c.fields = pallas_codec::utils::MaybeIndefArray::Indef(fields);
        }
        let err = GanglionDatum::from_plutus_data(&d).unwrap_err().to_string();
        assert!(
            err.contains("orchestrator") && err.contains("3 bytes"),
            "{err}"
        );
        let err = GanglionDatum::from_plutus_data(&int(5))
            .unwrap_err()
            .to_string();
        assert!(err.contains("GanglionDatum"), "{err}");
    }

    mod properties {
        use super::*;
        use crate::data::{from_cbor, to_cbor};
        use proptest::prelude::*;

        fn assignment() -> impl Strategy<Value = Assignment> {
            (
                any::<[u8; 28]>(),
                any::<[u8; 32]>(),
                any::<u64>(),
                any::<u64>(),
            )
                .prop_map(|(provider, attest_key, gpus, rate)| Assignment {
                    provider,
                    attest_key,
                    gpus,
                    rate,
                })
        }

        fn datum() -> impl Strategy<Value = GanglionDatum> {
            let state = prop_oneof![
                Just(JobState::Open),
                (prop::collection::vec(assignment(), 0..9), any::<u64>()).prop_map(
                    |(assignments, started_at_ms)| JobState::Assigned {
                        assignments,
                        started_at_ms,
                    }
                ),
            ];
            let escrow = (
                any::<[u8; 32]>(),
                any::<[u8; 28]>(),
                prop::collection::vec(any::<u8>(), 0..100),
                any::<(u64, u64, u64, u64)>(),
                state,
            )
                .prop_map(
                    |(id, orchestrator, spec, (gpus, max_rate, budget, deadline_ms), state)| {
                        GanglionDatum::Escrow(EscrowDatum {
                            job_id: JobId(id),
                            orchestrator,
                            spec,
                            gpus,
                            max_rate,
                            budget,
                            deadline_ms,
                            state,
                        })
                    },
                );
            let bond = (
                any::<[u8; 28]>(),
                any::<[u8; 32]>(),
                prop::collection::vec(any::<u8>(), 0..80),
                any::<u64>(),
                any::<Option<u64>>(),
            )
                .prop_map(
                    |(provider, attest_key, peer_id, gpus, unbonding_since_ms)| {
                        GanglionDatum::Bond(BondDatum {
                            provider,
                            attest_key,
                            peer_id,
                            gpus,
                            unbonding_since_ms,
                        })
                    },
                );
            prop_oneof![escrow, bond]
        }

        proptest! {
            #[test]
            fn any_datum_round_trips_through_cbor(d in datum()) {
                let bytes = to_cbor(&d.to_plutus_data());
                let back = GanglionDatum::from_plutus_data(&from_cbor("datum", &bytes).unwrap()).unwrap();
                prop_assert_eq!(back, d);
            }

            #[test]
            fn arbitrary_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
                if let Ok(d) = from_cbor("datum", &bytes) {
                    let _ = GanglionDatum::from_plutus_data(&d);
                }
            }
        }
    }
}
