//! Local-tx-submission with readable rejections: the wire shapes the devnet's server and
//! every client share.
//!
//! pallas' Cardano instantiation (`TxValidationError`) models the Haskell node's rejection
//! tree and does not round-trip, so the devnet uses the generic pallas state machine with
//! its own rejection payload, [`WireRejection`] = CBOR `[rule: text, message: text]`. A
//! client keeps the reason raw ([`RawRejection`]): the devnet's shape, or a real
//! cardano-node's Conway `HardForkApplyTxErr` for a decoder of that encoding. Use
//! [`crate::client::N2cClient`] to submit and read rejections.

use pallas_codec::minicbor::{self, Decode, Decoder, Encode, Encoder, decode, encode};
use pallas_network::miniprotocols::localtxsubmission::{EraTx, GenericClient};

/// N2C era index of Conway transactions in `EraTx`.
pub const CONWAY_TX_ERA: u16 = 6;

/// A rejection as sent to the submitter: the rule name and a human-readable message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule}: {message}")]
pub struct WireRejection {
    /// Stable rule name: a cardano-ledger predicate failure name such as `FeeTooSmallUTxO`
    /// (the devnet's `ganglion_testnet::ledger::Rejection::rule`), or `MempoolFull`,
    /// `WrongEra`, `Internal`, `Unknown`.
    pub rule: String,
    /// Human-readable reason.
    pub message: String,
}

impl From<String> for WireRejection {
    fn from(message: String) -> Self {
        Self {
            rule: "Unknown".into(),
            message,
        }
    }
}

impl<C> Encode<C> for WireRejection {
    fn encode<W: encode::Write>(
        &self,
        e: &mut Encoder<W>,
        _ctx: &mut C,
    ) -> Result<(), encode::Error<W::Error>> {
        e.array(2)?.str(&self.rule)?.str(&self.message)?;
        Ok(())
    }
}

impl<'b, C> Decode<'b, C> for WireRejection {
    fn decode(d: &mut Decoder<'b>, _ctx: &mut C) -> Result<Self, decode::Error> {
        if d.array()? != Some(2) {
            return Err(decode::Error::message("rejection must be [rule, message]"));
        }
        Ok(Self {
            rule: d.str()?.to_string(),
            message: d.str()?.to_string(),
        })
    }
}

/// A rejection reason as it came over the wire: one whole CBOR item, undecoded. A client
/// receives either the devnet's [`WireRejection`] or a real cardano-node's Conway
/// `HardForkApplyTxErr`; [`RawRejection::devnet`] reads the first, anything else is left to
/// a decoder of the node's encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRejection(pub Vec<u8>);

impl RawRejection {
    /// The devnet's `[rule, message]`, if that is what this is.
    pub fn devnet(&self) -> Option<WireRejection> {
        let mut d = Decoder::new(&self.0);
        let r: WireRejection = d.decode().ok()?;
        (d.position() == self.0.len()).then_some(r)
    }
}

impl From<String> for RawRejection {
    /// pallas' state machine turns its own errors into a reason: kept as a CBOR text item.
    fn from(message: String) -> Self {
        Self(minicbor::to_vec(&message).unwrap_or_default())
    }
}

impl<C> Encode<C> for RawRejection {
    fn encode<W: encode::Write>(
        &self,
        e: &mut Encoder<W>,
        _ctx: &mut C,
    ) -> Result<(), encode::Error<W::Error>> {
        e.writer_mut()
            .write_all(&self.0)
            .map_err(encode::Error::write)?;
        Ok(())
    }
}

impl<'b, C> Decode<'b, C> for RawRejection {
    fn decode(d: &mut Decoder<'b>, _ctx: &mut C) -> Result<Self, decode::Error> {
        let start = d.position();
        d.skip()?;
        Ok(Self(d.input()[start..d.position()].to_vec()))
    }
}

/// Client side of local-tx-submission, to the devnet or a real cardano-node: the
/// rejection reason is kept raw ([`RawRejection`]).
pub type Client = GenericClient<EraTx, RawRejection>;

/// Encode a rejection: the bytes a devnet sends as the reason (exposed for tests of the wire
/// format).
pub fn encode_rejection(r: &WireRejection) -> Vec<u8> {
    minicbor::to_vec(r).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_devnet_rejection_reads_back_from_its_raw_reason() {
        let w = WireRejection {
            rule: "FeeTooSmallUTxO".into(),
            message: "fee 1 < 2".into(),
        };
        let raw = RawRejection(encode_rejection(&w));
        assert_eq!(raw.devnet(), Some(w));
    }

    #[test]
    fn other_reasons_are_not_taken_for_the_devnets() {
        // A text item (pallas' own error) and a longer array are left undecoded.
        assert_eq!(RawRejection::from("closed".to_string()).devnet(), None);
        let mut three = Vec::new();
        Encoder::new(&mut three)
            .array(3)
            .and_then(|e| e.str("a"))
            .and_then(|e| e.str("b"))
            .and_then(|e| e.str("c"))
            .expect("cbor");
        assert_eq!(RawRejection(three).devnet(), None);
    }
}
