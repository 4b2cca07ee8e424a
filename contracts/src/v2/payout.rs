//! Payout addresses: where a provider is paid, as the Plutus V3 ledger `Address`.
//!
//! A bond records its provider's payout address — payment key *and* stake credential — and
//! an assignment copies it, so a claim's payout output must go to exactly that address
//! (DESIGN §3.2: "the provider's full address"). A third party that submits a claim cannot
//! put its own stake key on the provider's pay.
//!
//! PlutusData (plutus-ledger-api `Address`): constructor 0 `[payment_credential,
//! stake_credential: Option<StakingCredential>]`; `Credential`: `VerificationKey` = 0,
//! `Script` = 1; `StakingCredential::StakingHash` = 0 (pointers are not supported).

use pallas_addresses::{
    Address, Network, ShelleyAddress, ShelleyDelegationPart, ShelleyPaymentPart,
};
use pallas_crypto::hash::Hash;
use pallas_primitives::PlutusData;

use crate::data::{self, bytes, constr, malformed, option};
use crate::error::{Error, Result};
use crate::params::KeyHash;

/// The stake part of a payout address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum StakeCredential {
    /// A stake key hash (28 bytes).
    Key(#[serde(with = "hex::serde")] KeyHash),
    /// A stake script hash (28 bytes).
    Script(#[serde(with = "hex::serde")] KeyHash),
}

/// A payout address whose payment part is a verification key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Payout {
    /// The payment key hash (for a bond: the provider itself).
    #[serde(with = "hex::serde")]
    pub key: KeyHash,
    /// The stake credential, if the address delegates.
    pub stake: Option<StakeCredential>,
}

impl Payout {
    /// The enterprise address of `key` (no stake part).
    pub fn enterprise(key: KeyHash) -> Self {
        Self { key, stake: None }
    }

    /// The Shelley address bytes on `network` (base address with a stake part, enterprise
    /// without).
    pub fn address(&self, network: Network) -> Vec<u8> {
        let delegation = match self.stake {
            None => ShelleyDelegationPart::Null,
            Some(StakeCredential::Key(h)) => ShelleyDelegationPart::Key(Hash::new(h)),
            Some(StakeCredential::Script(h)) => ShelleyDelegationPart::Script(Hash::new(h)),
        };
        ShelleyAddress::new(
            network,
            ShelleyPaymentPart::Key(Hash::new(self.key)),
            delegation,
        )
        .to_vec()
    }

    /// Reads a Shelley address (bytes) whose payment part is a key.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] for bytes that are no address, a Byron or stake address, a
    /// script payment part or a pointer stake part.
    pub fn from_address(address: &[u8]) -> Result<Self> {
        let bad = |why: &str| Error::InvalidRequest(format!("payout address: {why}"));
        let parsed = Address::from_bytes(address).map_err(|e| bad(&e.to_string()))?;
        let Address::Shelley(a) = parsed else {
            return Err(bad("not a Shelley payment address"));
        };
        let key = match a.payment() {
            ShelleyPaymentPart::Key(h) => **h,
            ShelleyPaymentPart::Script(_) => return Err(bad("the payment part is a script")),
        };
        let stake = match a.delegation() {
            ShelleyDelegationPart::Null => None,
            ShelleyDelegationPart::Key(h) => Some(StakeCredential::Key(**h)),
            ShelleyDelegationPart::Script(h) => Some(StakeCredential::Script(**h)),
            ShelleyDelegationPart::Pointer(_) => {
                return Err(bad("pointer stake parts are not supported"));
            }
        };
        Ok(Self { key, stake })
    }

    /// PlutusData: the ledger `Address`.
    pub fn to_plutus_data(&self) -> PlutusData {
        let stake = self.stake.map(|s| {
            let credential = match s {
                StakeCredential::Key(h) => constr(0, vec![bytes(h)]),
                StakeCredential::Script(h) => constr(1, vec![bytes(h)]),
            };
            constr(0, vec![credential])
        });
        constr(0, vec![constr(0, vec![bytes(self.key)]), option(stake)])
    }

    /// Decodes a ledger `Address` with a key payment part.
    ///
    /// # Errors
    /// [`Error::MalformedData`] for any other shape (script payment part, pointer).
    pub fn from_plutus_data(d: &PlutusData) -> Result<Self> {
        let mut f = data::record("Address", d, 0, 2)?;
        let mut payment = data::record("Credential", f.next_data("payment_credential")?, 0, 1)?;
        let key = payment.fixed("key")?;
        let (some, mut o) = data::fields("Option", f.next_data("stake_credential")?)?;
        let stake = match some {
            1 => None,
            0 => {
                let mut staking = data::record("StakingCredential", o.next_data("stake")?, 0, 1)?;
                let (kind, mut c) = data::fields("Credential", staking.next_data("credential")?)?;
                let hash = c.fixed("hash")?;
                Some(match kind {
                    0 => StakeCredential::Key(hash),
                    1 => StakeCredential::Script(hash),
                    i => return Err(malformed("Credential", format!("constructor {i}"))),
                })
            }
            i => return Err(malformed("Option", format!("constructor {i}"))),
        };
        Ok(Self { key, stake })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{from_cbor, to_cbor};

    #[test]
    fn payouts_round_trip_through_plutus_data_and_address_bytes() {
        for p in [
            Payout::enterprise([1; 28]),
            Payout {
                key: [2; 28],
                stake: Some(StakeCredential::Key([3; 28])),
            },
            Payout {
                key: [4; 28],
                stake: Some(StakeCredential::Script([5; 28])),
            },
        ] {
            let d = from_cbor("address", &to_cbor(&p.to_plutus_data())).unwrap();
            assert_eq!(Payout::from_plutus_data(&d).unwrap(), p);
            assert_eq!(
                Payout::from_address(&p.address(Network::Testnet)).unwrap(),
                p
            );
        }
    }

    #[test]
    fn a_script_payment_address_is_no_payout() {
        let script = ShelleyAddress::new(
            Network::Testnet,
            ShelleyPaymentPart::Script(Hash::new([9; 28])),
            ShelleyDelegationPart::Null,
        )
        .to_vec();
        let err = Payout::from_address(&script).unwrap_err().to_string();
        assert!(err.contains("script"), "{err}");
    }
}
