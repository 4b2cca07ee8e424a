//! Datums at the Ganglion script address, with exact PlutusData codecs.
//!
//! Constructor indices (mirroring `contracts/aiken/lib/ganglion/v2/types.ak`):
//! `GanglionDatum::Escrow` = 0, `GanglionDatum::Bond` = 1, `GanglionDatum::Burnt` = 2;
//! `JobState::Open` = 0, `JobState::Assigned` = 1; `Assignment` = 0; `Option`: `Some` = 0,
//! `None` = 1. Times are POSIX ms, rates NTX base units per GPU-hour.

use pallas_primitives::PlutusData;

use crate::data::{self, bytes, constr, int, list, malformed, option, to_cbor};
use crate::error::Result;
use crate::params::KeyHash;
use crate::tx::TxoRef;
use crate::v2::payout::Payout;

/// Job id: the asset name of the job's thread token, `blake2b_256(serialiseData(seed))`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct JobId(#[serde(with = "hex::serde")] pub [u8; 32]);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

/// The id of the job whose lock consumes `seed`: `blake2b_256(serialiseData(seed))`.
pub fn job_id_of(seed: &TxoRef) -> JobId {
    JobId(*pallas_crypto::hash::Hasher::<256>::hash(&to_cbor(
        &seed.to_plutus_data(),
    )))
}

/// The inline datum tagging payouts and refunds of a job: its id as a bytestring.
pub fn job_tag(job_id: &JobId) -> PlutusData {
    bytes(job_id.0)
}

/// One provider's share of a job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Assignment {
    /// The provider's payment key hash (its bond token's name).
    #[serde(with = "hex::serde")]
    pub provider: KeyHash,
    /// The ed25519 key of the provider's bond that signs acceptances and attestations.
    #[serde(with = "hex::serde")]
    pub attest_key: [u8; 32],
    /// Where the provider's claims pay: its bond's payout address, payment and stake part.
    pub payout: Payout,
    /// GPUs this provider runs.
    pub gpus: u64,
    /// Price in NTX base units per GPU-hour.
    pub rate: u64,
    /// The last moment (POSIX ms) the provider agreed to be assigned: the upper validity
    /// bound of the assign (or rescale) that adds it may not lie after it.
    pub accept_by_ms: u64,
    /// Where its paid window starts (POSIX ms): the validity lower bound of the Assign or
    /// Rescale that added it. The transaction builders set it. (Serde: 0 in records
    /// written before assignments had their own window.)
    #[serde(default)]
    pub started_at_ms: u64,
    /// Where its paid window ends (POSIX ms): the escrow's deadline, or earlier once the
    /// orchestrator released it ([`crate::v2::build::rescale`]). (Serde: 0 in records
    /// written before assignments had their own window.)
    #[serde(default)]
    pub until_ms: u64,
}

impl Assignment {
    /// PlutusData: constructor 0 `[provider, attest_key, payout, gpus, rate, accept_by,
    /// started_at, until]`.
    pub fn to_plutus_data(&self) -> PlutusData {
        constr(
            0,
            vec![
                bytes(self.provider),
                bytes(self.attest_key),
                self.payout.to_plutus_data(),
                int(self.gpus),
                int(self.rate),
                int(self.accept_by_ms),
                int(self.started_at_ms),
                int(self.until_ms),
            ],
        )
    }

    /// Decodes an assignment.
    ///
    /// # Errors
    /// [`crate::Error::MalformedData`] on any other shape.
    pub fn from_plutus_data(d: &PlutusData) -> Result<Self> {
        let mut f = data::record("Assignment", d, 0, 8)?;
        Ok(Self {
            provider: f.fixed("provider")?,
            attest_key: f.fixed("attest_key")?,
            payout: Payout::from_plutus_data(f.next_data("payout")?)?,
            gpus: f.uint("gpus")?,
            rate: f.uint("rate")?,
            accept_by_ms: f.uint("accept_by")?,
            started_at_ms: f.uint("started_at")?,
            until_ms: f.uint("until")?,
        })
    }

    /// Its paid window in ms, `until − started_at` (0 if inverted, which no escrow holds).
    pub fn window_ms(&self) -> u64 {
        self.until_ms.saturating_sub(self.started_at_ms)
    }

    /// Whether the orchestrator released it before the escrow's deadline `deadline_ms`.
    pub fn is_released(&self, deadline_ms: u64) -> bool {
        self.until_ms != deadline_ms
    }
}

/// Where an escrow stands.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum JobState {
    /// Locked, waiting for providers.
    Open,
    /// Assigned to providers.
    Assigned {
        /// Providers, their GPUs, rates and payout addresses.
        assignments: Vec<Assignment>,
        /// POSIX ms of the assign tx's lower validity bound: the job's first start (each
        /// assignment's own window is [`Assignment::started_at_ms`] to
        /// [`Assignment::until_ms`]).
        started_at_ms: u64,
        /// Indices of the assignments already claimed, newest first.
        claimed: Vec<u64>,
        /// NTX base units paid out by claims so far.
        paid: u64,
    },
}

impl JobState {
    /// Whether assignment `index` has claimed (false for an open escrow).
    pub fn has_claimed(&self, index: u64) -> bool {
        matches!(self, Self::Assigned { claimed, .. } if claimed.contains(&index))
    }
}

/// The datum of a job escrow.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EscrowDatum {
    /// The job id (thread token name).
    pub job_id: JobId,
    /// The orchestrator's payment key hash: signs assign/cancel, receives refunds.
    #[serde(with = "hex::serde")]
    pub orchestrator: KeyHash,
    /// The orchestrator's ed25519 receipt key: signs [`crate::v2::signed::Receipt`]s.
    #[serde(with = "hex::serde")]
    pub receipt_key: [u8; 32],
    /// CID bytes of the ensemble spec (binary CID, e.g. CIDv1 raw-leaves).
    #[serde(with = "hex::serde")]
    pub spec: Vec<u8>,
    /// GPUs the job needs in total.
    pub gpus: u64,
    /// Highest acceptable rate, NTX base units per GPU-hour.
    pub max_rate: u64,
    /// NTX base units locked (equals the NTX in the escrow UTxO at the lock).
    pub budget: u64,
    /// POSIX ms: no GPU time after it is paid; claims stay possible for the validator's
    /// claim window after it, then the escrow can only expire.
    pub deadline_ms: u64,
    /// Milliseconds between two receipts; a claim may count at most one interval past its
    /// receipt (DESIGN §3.1 G1, G2).
    pub receipt_interval_ms: u64,
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
    /// Where this provider is paid; its payment key is `provider` (checked at post).
    pub payout: Payout,
    /// GPUs the bond backs.
    pub gpus: u64,
    /// POSIX ms when unbonding started, if it did.
    pub unbonding_since_ms: Option<u64>,
    /// The assignments this bond backs, newest first (DESIGN §3.1 G5). Assign adds one and
    /// drops the lapsed ones; the provider's claim may drop its job's ([`Self::released`]).
    pub commitments: Vec<Commitment>,
}

/// What a bond backs for one job (DESIGN §3.1 G5): `gpus` GPUs until `until_ms` (the
/// escrow's deadline plus the claim window, POSIX ms: the earliest expire, which may slash
/// the bond). PlutusData: constructor 0 `[job_id, gpus, until]`.
///
/// A commitment is *live* at a time `t` (a transaction's validity lower bound) while
/// `until_ms >= t`: live ones count against the bond's `gpus` and keep it from unbonding.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Commitment {
    /// The job.
    pub job_id: JobId,
    /// GPUs of the bond it holds.
    pub gpus: u64,
    /// POSIX ms: deadline + claim window.
    pub until_ms: u64,
}

impl Commitment {
    /// Live at `now_ms` (see the type's docs).
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.until_ms >= now_ms
    }

    fn to_plutus_data(&self) -> PlutusData {
        constr(
            0,
            vec![bytes(self.job_id.0), int(self.gpus), int(self.until_ms)],
        )
    }

    fn from_plutus_data(d: &PlutusData) -> Result<Self> {
        let (index, mut f) = data::fields("Commitment", d)?;
        if index != 0 {
            return Err(malformed("Commitment", format!("constructor {index}")));
        }
        Ok(Self {
            job_id: JobId(f.fixed("job_id")?),
            gpus: f.uint("gpus")?,
            until_ms: f.uint("until")?,
        })
    }
}

impl BondDatum {
    /// GPUs held by commitments live at `now_ms` (POSIX ms).
    pub fn committed_gpus(&self, now_ms: u64) -> u64 {
        self.commitments
            .iter()
            .filter(|c| c.is_live(now_ms))
            .map(|c| c.gpus)
            .sum()
    }

    /// The bond once its commitments to `job` are dropped (the `Release` a provider's claim
    /// carries: the validator's `bond.release`).
    pub fn released(&self, job: &JobId) -> Self {
        Self {
            commitments: self
                .commitments
                .iter()
                .filter(|c| c.job_id != *job)
                .cloned()
                .collect(),
            ..self.clone()
        }
    }

    /// True when the bond holds a commitment to `job` (live or lapsed).
    pub fn commits_to(&self, job: &JobId) -> bool {
        self.commitments.iter().any(|c| c.job_id == *job)
    }

    /// GPUs free for a new assignment at `now_ms`: `gpus` less the live commitments.
    pub fn free_gpus(&self, now_ms: u64) -> u64 {
        self.gpus.saturating_sub(self.committed_gpus(now_ms))
    }
}

/// Any datum at the Ganglion script address.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GanglionDatum {
    /// Constructor 0.
    Escrow(EscrowDatum),
    /// Constructor 1.
    Bond(BondDatum),
    /// Constructor 2 `[job_id]`: NTX slashed from defaulters of `job_id` beyond what the
    /// orchestrator lost; the validator never lets it be spent.
    Burnt(JobId),
}

fn state_data(state: &JobState) -> PlutusData {
    match state {
        JobState::Open => constr(0, vec![]),
        JobState::Assigned {
            assignments,
            started_at_ms,
            claimed,
            paid,
        } => constr(
            1,
            vec![
                list(assignments.iter().map(Assignment::to_plutus_data).collect()),
                int(*started_at_ms),
                list(claimed.iter().map(|i| int(*i)).collect()),
                int(*paid),
            ],
        ),
    }
}

fn state_of(d: &PlutusData) -> Result<JobState> {
    let (index, mut s) = data::fields("JobState", d)?;
    Ok(match index {
        0 => JobState::Open,
        1 => JobState::Assigned {
            assignments: s
                .list("assignments")?
                .iter()
                .map(Assignment::from_plutus_data)
                .collect::<Result<_>>()?,
            started_at_ms: s.uint("started_at")?,
            claimed: s
                .list("claimed")?
                .iter()
                .map(|i| {
                    data::as_int(i)
                        .and_then(|i| u64::try_from(i).ok())
                        .ok_or_else(|| malformed("JobState", "claimed: expected indices"))
                })
                .collect::<Result<_>>()?,
            paid: s.uint("paid")?,
        },
        i => return Err(malformed("JobState", format!("constructor {i}"))),
    })
}

impl GanglionDatum {
    /// PlutusData: `Escrow` = constructor 0 `[job_id, orchestrator, receipt_key, spec, gpus,
    /// max_rate, budget, deadline, receipt_interval, state]`; `Bond` = constructor 1
    /// `[provider, attest_key, peer_id, payout, gpus, unbonding_since, commitments]`; `Burnt` =
    /// constructor 2 `[job_id]`.
    pub fn to_plutus_data(&self) -> PlutusData {
        match self {
            Self::Escrow(e) => constr(
                0,
                vec![
                    bytes(e.job_id.0),
                    bytes(e.orchestrator),
                    bytes(e.receipt_key),
                    bytes(e.spec.clone()),
                    int(e.gpus),
                    int(e.max_rate),
                    int(e.budget),
                    int(e.deadline_ms),
                    int(e.receipt_interval_ms),
                    state_data(&e.state),
                ],
            ),
            Self::Bond(b) => constr(
                1,
                vec![
                    bytes(b.provider),
                    bytes(b.attest_key),
                    bytes(b.peer_id.clone()),
                    b.payout.to_plutus_data(),
                    int(b.gpus),
                    option(b.unbonding_since_ms.map(int)),
                    list(
                        b.commitments
                            .iter()
                            .map(Commitment::to_plutus_data)
                            .collect(),
                    ),
                ],
            ),
            Self::Burnt(job_id) => constr(2, vec![bytes(job_id.0)]),
        }
    }

    /// Decodes a datum found at the script address.
    ///
    /// # Errors
    /// [`crate::Error::MalformedData`] naming the type and field that do not fit.
    pub fn from_plutus_data(d: &PlutusData) -> Result<Self> {
        let (index, mut f) = data::fields("GanglionDatum", d)?;
        match index {
            0 => Ok(Self::Escrow(EscrowDatum {
                job_id: JobId(f.fixed("job_id")?),
                orchestrator: f.fixed("orchestrator")?,
                receipt_key: f.fixed("receipt_key")?,
                spec: f.bytes("spec")?,
                gpus: f.uint("gpus")?,
                max_rate: f.uint("max_rate")?,
                budget: f.uint("budget")?,
                deadline_ms: f.uint("deadline")?,
                receipt_interval_ms: f.uint("receipt_interval")?,
                state: state_of(f.next_data("state")?)?,
            })),
            1 => {
                let provider = f.fixed("provider")?;
                let attest_key = f.fixed("attest_key")?;
                let peer_id = f.bytes("peer_id")?;
                let payout = Payout::from_plutus_data(f.next_data("payout")?)?;
                let gpus = f.uint("gpus")?;
                let (opt, mut o) = data::fields("Option", f.next_data("unbonding_since")?)?;
                let unbonding_since_ms = match opt {
                    0 => Some(o.uint("unbonding_since")?),
                    1 => None,
                    i => return Err(malformed("Option", format!("constructor {i}"))),
                };
                let commitments = f
                    .list("commitments")?
                    .iter()
                    .map(Commitment::from_plutus_data)
                    .collect::<Result<_>>()?;
                Ok(Self::Bond(BondDatum {
                    provider,
                    attest_key,
                    peer_id,
                    payout,
                    gpus,
                    unbonding_since_ms,
                    commitments,
                }))
            }
            2 => Ok(Self::Burnt(JobId(f.fixed("job_id")?))),
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
            receipt_key: [7; 32],
            spec: vec![1, 85, 18, 32, 9, 9],
            gpus: 4,
            max_rate: 1_000_000,
            budget: 40_000_000,
            deadline_ms: 1_700_000_000_000,
            receipt_interval_ms: 30_000,
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
                    payout: Payout {
                        key: [3; 28],
                        stake: Some(crate::v2::payout::StakeCredential::Key([8; 28])),
                    },
                    gpus: 4,
                    rate: 900_000,
                    accept_by_ms: 1_699_999_100_000,
                    started_at_ms: 1_699_999_000_000,
                    until_ms: 1_700_000_000_000,
                }],
                started_at_ms: 1_699_999_000_000,
                claimed: vec![0],
                paid: 17,
            }),
            GanglionDatum::Burnt(JobId([9; 32])),
            GanglionDatum::Bond(BondDatum {
                provider: [5; 28],
                attest_key: [6; 32],
                peer_id: vec![0, 36, 8, 1],
                payout: Payout::enterprise([5; 28]),
                gpus: 8,
                unbonding_since_ms: Some(12),
                commitments: vec![
                    Commitment {
                        job_id: JobId([1; 32]),
                        gpus: 3,
                        until_ms: 1_700_000_600_000,
                    },
                    Commitment {
                        job_id: JobId([2; 32]),
                        gpus: 5,
                        until_ms: 9,
                    },
                ],
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

    #[test]
    fn a_record_written_before_the_window_fields_still_reads() {
        let json = format!(
            r#"{{"provider":"{}","attest_key":"{}","payout":{},"gpus":2,"rate":7,"accept_by_ms":10}}"#,
            hex::encode([3u8; 28]),
            hex::encode([4u8; 32]),
            serde_json::to_string(&Payout::enterprise([3; 28])).unwrap()
        );
        let a: Assignment = serde_json::from_str(&json).unwrap();
        assert_eq!((a.gpus, a.started_at_ms, a.until_ms), (2, 0, 0));
    }

    #[test]
    fn an_assignment_has_exactly_eight_fields() {
        let a = Assignment {
            provider: [3; 28],
            attest_key: [4; 32],
            payout: Payout::enterprise([3; 28]),
            gpus: 2,
            rate: 7,
            accept_by_ms: 10,
            started_at_ms: 11,
            until_ms: 12,
        };
        let PlutusData::Constr(c) = a.to_plutus_data() else {
            panic!("constr")
        };
        let all = c.fields.to_vec();
        assert_eq!(all.len(), 8);
        assert_eq!(all[6], int(11));
        assert_eq!(all[7], int(12));
        // The six-field layout before Rescale, or a ninth field, is refused.
        for n in [6, 9] {
            let mut fields = all.clone();
            fields.resize(n, int(0));
            let d = constr(0, fields);
            let err = Assignment::from_plutus_data(&d).unwrap_err().to_string();
            assert!(err.contains("expected 8"), "{err}");
        }
        assert_eq!(a.window_ms(), 1);
        assert!(a.is_released(13) && !a.is_released(12));
    }

    mod properties {
        use super::*;
        use crate::data::{from_cbor, to_cbor};
        use proptest::prelude::*;

        fn assignment() -> impl Strategy<Value = Assignment> {
            (
                any::<[u8; 28]>(),
                any::<[u8; 32]>(),
                any::<Option<[u8; 28]>>(),
                any::<(u64, u64, u64, u64, u64)>(),
            )
                .prop_map(
                    |(
                        provider,
                        attest_key,
                        stake,
                        (gpus, rate, accept_by_ms, started_at_ms, until_ms),
                    )| Assignment {
                        provider,
                        attest_key,
                        payout: Payout {
                            key: provider,
                            stake: stake.map(crate::v2::payout::StakeCredential::Key),
                        },
                        gpus,
                        rate,
                        accept_by_ms,
                        started_at_ms,
                        until_ms,
                    },
                )
        }

        fn datum() -> impl Strategy<Value = GanglionDatum> {
            let state = prop_oneof![
                Just(JobState::Open),
                (
                    prop::collection::vec(assignment(), 0..9),
                    any::<u64>(),
                    prop::collection::vec(0u64..9, 0..9),
                    any::<u64>()
                )
                    .prop_map(|(assignments, started_at_ms, claimed, paid)| {
                        JobState::Assigned {
                            assignments,
                            started_at_ms,
                            claimed,
                            paid,
                        }
                    }),
            ];
            let escrow = (
                any::<([u8; 32], [u8; 32])>(),
                any::<[u8; 28]>(),
                prop::collection::vec(any::<u8>(), 0..100),
                any::<(u64, u64, u64, u64, u64)>(),
                state,
            )
                .prop_map(
                    |(
                        (id, receipt_key),
                        orchestrator,
                        spec,
                        (gpus, max_rate, budget, deadline_ms, receipt_interval_ms),
                        state,
                    )| {
                        GanglionDatum::Escrow(EscrowDatum {
                            job_id: JobId(id),
                            orchestrator,
                            receipt_key,
                            spec,
                            gpus,
                            max_rate,
                            budget,
                            deadline_ms,
                            receipt_interval_ms,
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
                prop::collection::vec(
                    (any::<[u8; 32]>(), any::<u64>(), any::<u64>()).prop_map(
                        |(id, gpus, until_ms)| Commitment {
                            job_id: JobId(id),
                            gpus,
                            until_ms,
                        },
                    ),
                    0..4,
                ),
            )
                .prop_map(
                    |(provider, attest_key, peer_id, gpus, unbonding_since_ms, commitments)| {
                        GanglionDatum::Bond(BondDatum {
                            provider,
                            attest_key,
                            peer_id,
                            payout: Payout::enterprise(provider),
                            gpus,
                            unbonding_since_ms,
                            commitments,
                        })
                    },
                );
            let burnt = any::<[u8; 32]>().prop_map(|id| GanglionDatum::Burnt(JobId(id)));
            prop_oneof![escrow, bond, burnt]
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

#[cfg(test)]
mod commitment_tests {
    use super::*;

    #[test]
    fn only_live_commitments_hold_gpus() {
        let c = |gpus, until_ms| Commitment {
            job_id: JobId([gpus as u8; 32]),
            gpus,
            until_ms,
        };
        let b = BondDatum {
            provider: [1; 28],
            attest_key: [2; 32],
            peer_id: vec![],
            payout: Payout::enterprise([1; 28]),
            gpus: 8,
            unbonding_since_ms: None,
            commitments: vec![c(2, 100), c(3, 50)],
        };
        assert_eq!(b.committed_gpus(50), 5, "live through `until` itself");
        assert_eq!(b.committed_gpus(51), 2);
        assert_eq!(b.free_gpus(51), 6);
        assert_eq!(b.free_gpus(101), 8);
    }
}
