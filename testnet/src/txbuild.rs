//! A minimal Conway transaction builder for devnet tests, the CLI and the bench:
//! hand-encoded CBOR (definite lengths), signed with [`DevKey`]s, exact fee by iteration.
//! Real wallets live in the node; this only has to produce valid ledger bytes.

use pallas_codec::minicbor::{self, Encoder};
use pallas_crypto::hash::{Hash, Hasher};

use crate::keys::DevKey;
use ganglion_cardano::fees;
use ganglion_cardano::protocol::{ExUnits, ProtocolParams};
use ganglion_cardano::txo::TxoRef;

/// A redeemer to attach: tag (0 spend, 1 mint), index, PlutusData CBOR, budget.
#[derive(Debug, Clone)]
pub struct RedeemerSpec {
    /// Redeemer tag (0 = spend, 1 = mint).
    pub tag: u8,
    /// Index into the sorted inputs / policies.
    pub index: u32,
    /// PlutusData CBOR.
    pub data: Vec<u8>,
    /// Declared budget.
    pub ex_units: ExUnits,
}

/// The transaction to build. Fields mirror the Conway body (CDDL map keys given).
#[derive(Debug, Clone, Default)]
pub struct TxSpec {
    /// Key 0: inputs.
    pub inputs: Vec<TxoRef>,
    /// Key 1: outputs, raw CBOR (see [`crate::genesis::encode_output`], [`output_with_datum`]).
    pub outputs: Vec<Vec<u8>>,
    /// Key 2: fee (lovelace); [`build_balanced`] computes it.
    pub fee: u64,
    /// Key 3: ttl (exclusive upper slot).
    pub ttl: Option<u64>,
    /// Key 8: validity start slot.
    pub valid_from: Option<u64>,
    /// Key 9: mint: (policy, asset name, quantity).
    pub mint: Vec<(Hash<28>, Vec<u8>, i64)>,
    /// Key 11: script data hash.
    pub script_data_hash: Option<Hash<32>>,
    /// Key 13: collateral inputs.
    pub collateral: Vec<TxoRef>,
    /// Key 14: required signers.
    pub required_signers: Vec<Hash<28>>,
    /// Key 16: collateral return (raw output CBOR).
    pub collateral_return: Option<Vec<u8>>,
    /// Key 17: total collateral.
    pub total_collateral: Option<u64>,
    /// Key 18: reference inputs.
    pub reference_inputs: Vec<TxoRef>,
    /// Key 7: auxiliary data hash (set it to [`aux_hash`] of `auxiliary_data`).
    pub auxiliary_data_hash: Option<Hash<32>>,
    /// Key 15: network id.
    pub network_id: Option<u8>,
    /// Auxiliary data (raw CBOR, e.g. a metadata map), the transaction's fourth element.
    pub auxiliary_data: Option<Vec<u8>>,
    /// Witness set: native scripts (raw CBOR).
    pub native_scripts: Vec<Vec<u8>>,
    /// Witness set: Plutus V3 scripts (uplc `to_cbor` bytes).
    pub plutus_v3_scripts: Vec<Vec<u8>>,
    /// Witness set: datums (PlutusData CBOR).
    pub datums: Vec<Vec<u8>>,
    /// Witness set: redeemers.
    pub redeemers: Vec<RedeemerSpec>,
    /// `is_valid` flag (false = expect phase-2 failure, pay collateral).
    pub invalid: bool,
}

type EncResult = Result<(), minicbor::encode::Error<std::convert::Infallible>>;

fn inputs(e: &mut Encoder<&mut Vec<u8>>, refs: &[TxoRef]) -> EncResult {
    // A set: sorted, each element once (the Conway decoder refuses a repeat).
    let mut sorted = refs.to_vec();
    sorted.sort();
    sorted.dedup();
    e.array(sorted.len() as u64)?;
    for r in sorted {
        e.array(2)?.bytes(r.tx_hash.as_ref())?.u64(r.index)?;
    }
    Ok(())
}

/// The body CBOR.
pub fn body_cbor(s: &TxSpec) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    let mut n = 3;
    n += u64::from(s.ttl.is_some()) + u64::from(s.valid_from.is_some());
    n += u64::from(!s.mint.is_empty()) + u64::from(s.script_data_hash.is_some());
    n += u64::from(!s.collateral.is_empty()) + u64::from(!s.required_signers.is_empty());
    n += u64::from(s.collateral_return.is_some()) + u64::from(s.total_collateral.is_some());
    n += u64::from(!s.reference_inputs.is_empty());
    n += u64::from(s.auxiliary_data_hash.is_some()) + u64::from(s.network_id.is_some());
    let r: EncResult = (|| {
        e.map(n)?;
        e.u8(0)?;
        inputs(&mut e, &s.inputs)?;
        e.u8(1)?.array(s.outputs.len() as u64)?;
        for o in &s.outputs {
            e.writer_mut().extend_from_slice(o);
        }
        e.u8(2)?.u64(s.fee)?;
        if let Some(t) = s.ttl {
            e.u8(3)?.u64(t)?;
        }
        if let Some(h) = s.auxiliary_data_hash {
            e.u8(7)?.bytes(h.as_ref())?;
        }
        if let Some(v) = s.valid_from {
            e.u8(8)?.u64(v)?;
        }
        if !s.mint.is_empty() {
            let mut by_policy: std::collections::BTreeMap<Hash<28>, Vec<(Vec<u8>, i64)>> =
                Default::default();
            for (p, a, q) in &s.mint {
                by_policy.entry(*p).or_default().push((a.clone(), *q));
            }
            e.u8(9)?.map(by_policy.len() as u64)?;
            for (p, assets) in by_policy {
                e.bytes(p.as_ref())?.map(assets.len() as u64)?;
                for (a, q) in assets {
                    e.bytes(&a)?.i64(q)?;
                }
            }
        }
        if let Some(h) = s.script_data_hash {
            e.u8(11)?.bytes(h.as_ref())?;
        }
        if !s.collateral.is_empty() {
            e.u8(13)?;
            inputs(&mut e, &s.collateral)?;
        }
        if !s.required_signers.is_empty() {
            let signers: std::collections::BTreeSet<&Hash<28>> =
                s.required_signers.iter().collect();
            e.u8(14)?.array(signers.len() as u64)?;
            for k in signers {
                e.bytes(k.as_ref())?;
            }
        }
        if let Some(n) = s.network_id {
            e.u8(15)?.u8(n)?;
        }
        if let Some(o) = &s.collateral_return {
            e.u8(16)?;
            e.writer_mut().extend_from_slice(o);
        }
        if let Some(t) = s.total_collateral {
            e.u8(17)?.u64(t)?;
        }
        if !s.reference_inputs.is_empty() {
            e.u8(18)?;
            inputs(&mut e, &s.reference_inputs)?;
        }
        Ok(())
    })();
    debug_assert!(r.is_ok());
    buf
}

/// The redeemers CBOR (legacy list form), as hashed by the script data hash.
pub fn redeemers_cbor(rs: &[RedeemerSpec]) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    let _ = (|| -> EncResult {
        e.array(rs.len() as u64)?;
        for r in rs {
            e.array(4)?.u8(r.tag)?.u32(r.index)?;
            e.writer_mut().extend_from_slice(&r.data);
            e.array(2)?.u64(r.ex_units.mem)?.u64(r.ex_units.steps)?;
        }
        Ok(())
    })();
    buf
}

/// The datums CBOR (list form), as hashed by the script data hash.
pub fn datums_cbor(ds: &[Vec<u8>]) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    let _ = e.array(ds.len() as u64);
    for d in ds {
        buf.extend_from_slice(d);
    }
    buf
}

/// The full transaction CBOR, signed by `signers` over the body hash.
pub fn build(s: &TxSpec, signers: &[&DevKey]) -> Vec<u8> {
    let body = body_cbor(s);
    let hash = Hasher::<256>::hash(&body);
    let mut wit = Vec::new();
    let mut e = Encoder::new(&mut wit);
    let n = u64::from(!signers.is_empty())
        + u64::from(!s.native_scripts.is_empty())
        + u64::from(!s.datums.is_empty())
        + u64::from(!s.redeemers.is_empty())
        + u64::from(!s.plutus_v3_scripts.is_empty());
    let _ = (|| -> EncResult {
        e.map(n)?;
        if !signers.is_empty() {
            e.u8(0)?.array(signers.len() as u64)?;
            for k in signers {
                e.array(2)?
                    .bytes(&k.public_key())?
                    .bytes(&k.sign(hash.as_ref()))?;
            }
        }
        if !s.native_scripts.is_empty() {
            e.u8(1)?.array(s.native_scripts.len() as u64)?;
            for ns in &s.native_scripts {
                e.writer_mut().extend_from_slice(ns);
            }
        }
        if !s.datums.is_empty() {
            e.u8(4)?;
            e.writer_mut().extend_from_slice(&datums_cbor(&s.datums));
        }
        if !s.redeemers.is_empty() {
            e.u8(5)?;
            e.writer_mut()
                .extend_from_slice(&redeemers_cbor(&s.redeemers));
        }
        if !s.plutus_v3_scripts.is_empty() {
            e.u8(7)?.array(s.plutus_v3_scripts.len() as u64)?;
            for p in &s.plutus_v3_scripts {
                e.bytes(p)?;
            }
        }
        Ok(())
    })();
    let mut tx = vec![0x84];
    tx.extend_from_slice(&body);
    tx.extend_from_slice(&wit);
    tx.push(if s.invalid { 0xf4 } else { 0xf5 });
    match &s.auxiliary_data {
        Some(a) => tx.extend_from_slice(a),
        None => tx.push(0xf6),
    }
    tx
}

/// The auxiliary data hash: blake2b-256 of the auxiliary data bytes.
pub fn aux_hash(aux: &[u8]) -> Hash<32> {
    Hasher::<256>::hash(aux)
}

/// The size the fee counts for `bytes` built by [`build`] ([`fees::size_for_fee`]: without
/// the `is_valid` flag; [`build`] writes a definite 4-array, so this is the wire size − 1).
pub fn fee_size(bytes: &[u8]) -> u64 {
    crate::ledger::decode_tx(bytes)
        .map(|tx| fees::size_for_fee(&tx))
        .unwrap_or_else(|_| (bytes.len() as u64).saturating_sub(1))
}

/// Set `s.fee` to the exact minimum fee for the signed size (adjusting `change_output`,
/// an index into `s.outputs` holding `change_lovelace` before fees, via `make_change`),
/// and return the signed bytes. `ref_script_bytes` is the reference-script size spent.
pub fn build_balanced(
    params: &ProtocolParams,
    s: &mut TxSpec,
    signers: &[&DevKey],
    ref_script_bytes: u64,
    mut make_change: impl FnMut(&mut TxSpec, u64),
) -> Vec<u8> {
    let units = s.redeemers.iter().fold(ExUnits::default(), |a, r| ExUnits {
        mem: a.mem + r.ex_units.mem,
        steps: a.steps + r.ex_units.steps,
    });
    let mut fee = 0;
    for _ in 0..4 {
        s.fee = fee;
        make_change(s, fee);
        let bytes = build(s, signers);
        let needed = fees::min_fee(params, fee_size(&bytes), units, ref_script_bytes);
        if needed == fee {
            return bytes;
        }
        fee = needed;
    }
    s.fee = fee;
    make_change(s, fee);
    build(s, signers)
}

/// A Babbage output with an inline datum: `{0: address, 1: coin, 2: [1, #6.24(datum)]}`.
pub fn output_with_datum(address: &[u8], lovelace: u64, datum: &[u8]) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    let _ = (|| -> EncResult {
        e.map(3)?.u8(0)?.bytes(address)?.u8(1)?.u64(lovelace)?;
        e.u8(2)?
            .array(2)?
            .u8(1)?
            .tag(minicbor::data::Tag::new(24))?
            .bytes(datum)?;
        Ok(())
    })();
    buf
}

/// A Babbage output carrying a Plutus V3 reference script:
/// `{0: address, 1: coin, 3: #6.24(bytes([3, script]))}`.
pub fn output_with_script_ref(address: &[u8], lovelace: u64, plutus_v3: &[u8]) -> Vec<u8> {
    let mut script_ref = Vec::new();
    let mut e = Encoder::new(&mut script_ref);
    let _ = (|| -> EncResult {
        e.array(2)?.u8(3)?.bytes(plutus_v3)?;
        Ok(())
    })();
    let mut buf = Vec::new();
    let mut e = Encoder::new(&mut buf);
    let _ = (|| -> EncResult {
        e.map(3)?.u8(0)?.bytes(address)?.u8(1)?.u64(lovelace)?;
        e.u8(3)?
            .tag(minicbor::data::Tag::new(24))?
            .bytes(&script_ref)?;
        Ok(())
    })();
    buf
}
