//! Conway block assembly from raw transaction bytes.
//!
//! The body segments (transaction bodies, witness sets, auxiliary data, invalid
//! transactions) are concatenations of each transaction's *original* bytes, so transaction
//! hashes stay stable. The header carries the body size and hash (blake2b-256 of the four
//! segment hashes, Babbage+ rule), `prev_hash` chaining, protocol version 10 and dummy
//! VRF/KES bytes (the devnet has no leader election).

use pallas_codec::minicbor;
use pallas_codec::utils::Bytes;
use pallas_crypto::hash::{Hash, Hasher};
use pallas_primitives::VrfCert;
use pallas_primitives::babbage::{Header, HeaderBody, OperationalCert};

use crate::ledger::decode_tx;
use crate::ledger::rejection::Rejection;

/// HFC era tag of Conway blocks (`[7, block]`).
pub const CONWAY_BLOCK_ERA: u16 = 7;

/// N2N chainsync header variant of Conway headers.
pub const CONWAY_HEADER_VARIANT: u8 = 6;

/// A forged block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgedBlock {
    /// Block number (height; the first block is 1).
    pub number: u64,
    /// Slot.
    pub slot: u64,
    /// Header hash (blake2b-256 of the header CBOR).
    pub hash: Hash<32>,
    /// Previous header hash (`None` for the first block).
    pub prev_hash: Option<Hash<32>>,
    /// The header CBOR (N2N chainsync payload).
    pub header: Vec<u8>,
    /// The HFC-wrapped block CBOR `[7, block]` (blockfetch / N2C chainsync payload).
    pub wrapped: Vec<u8>,
}

/// Errors assembling a block.
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    /// A transaction's bytes are not a Conway transaction (it passed validation, so this
    /// is a bug or store corruption).
    #[error("transaction {index} cannot be re-decoded")]
    BadTx {
        /// Position in the block.
        index: usize,
        /// Decoder error.
        #[source]
        source: Rejection,
    },
    /// CBOR encoding failed (into memory: a header the encoder refuses, e.g. a bad length).
    #[error("CBOR encoding failed: {0}")]
    Encode(#[from] minicbor::encode::Error<std::convert::Infallible>),
}

fn enc_err(e: minicbor::encode::Error<std::convert::Infallible>) -> ProduceError {
    ProduceError::Encode(e)
}

/// The four raw body segments of a block holding `txs` (original transaction bytes).
///
/// # Errors
/// [`ProduceError`].
pub fn body_segments(txs: &[&[u8]]) -> Result<[Vec<u8>; 4], ProduceError> {
    let mut bodies = Vec::new();
    let mut wits = Vec::new();
    let mut aux = Vec::new();
    let mut invalid = Vec::new();
    let mut aux_count = 0u64;
    let mut aux_entries = Vec::new();
    {
        let mut eb = minicbor::Encoder::new(&mut bodies);
        eb.array(txs.len() as u64).map_err(enc_err)?;
        let mut ew = minicbor::Encoder::new(&mut wits);
        ew.array(txs.len() as u64).map_err(enc_err)?;
    }
    let mut invalid_idx = Vec::new();
    for (i, raw) in txs.iter().enumerate() {
        let tx = decode_tx(raw).map_err(|source| ProduceError::BadTx { index: i, source })?;
        bodies.extend_from_slice(tx.transaction_body.raw_cbor());
        wits.extend_from_slice(tx.transaction_witness_set.raw_cbor());
        if let pallas_codec::utils::Nullable::Some(a) = &tx.auxiliary_data {
            aux_count += 1;
            let mut e = minicbor::Encoder::new(&mut aux_entries);
            e.u64(i as u64).map_err(enc_err)?;
            aux_entries.extend_from_slice(a.raw_cbor());
        }
        if !tx.success {
            invalid_idx.push(i as u64);
        }
    }
    {
        let mut e = minicbor::Encoder::new(&mut aux);
        e.map(aux_count).map_err(enc_err)?;
    }
    aux.extend_from_slice(&aux_entries);
    {
        let mut e = minicbor::Encoder::new(&mut invalid);
        e.array(invalid_idx.len() as u64).map_err(enc_err)?;
        for i in invalid_idx {
            e.u64(i).map_err(enc_err)?;
        }
    }
    Ok([bodies, wits, aux, invalid])
}

/// The Babbage+ block body hash: blake2b-256 over the concatenated blake2b-256 hashes of
/// the four raw segments.
pub fn body_hash(segments: &[Vec<u8>; 4]) -> Hash<32> {
    let mut cat = Vec::with_capacity(128);
    for s in segments {
        cat.extend_from_slice(Hasher::<256>::hash(s).as_ref());
    }
    Hasher::<256>::hash(&cat)
}

/// Each transaction in its own Conway block (wrapped, as chain-sync serves it), chained from
/// block 1 at slots 100, 102, 104, …: how tests feed a ledger-accepted history to a follower.
///
/// # Errors
/// [`ProduceError`] for a transaction that does not decode.
pub fn chain_of(txs: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, ProduceError> {
    let mut prev = None;
    let mut out = Vec::with_capacity(txs.len());
    for (i, tx) in (0u64..).zip(txs) {
        let b = assemble(i + 1, 100 + 2 * i, prev, (10, 0), &[tx.as_slice()])?;
        prev = Some(b.hash);
        out.push(b.wrapped);
    }
    Ok(out)
}

/// The four raw body segments (headers' bodies, witnesses, auxiliary data, invalid indices)
/// of a wrapped block, as its body hash covers them.
///
/// # Errors
/// The decoder's error when `raw` is not a wrapped block.
pub fn raw_body_segments(raw: &[u8]) -> Result<[Vec<u8>; 4], minicbor::decode::Error> {
    let mut d = minicbor::Decoder::new(raw);
    d.array()?;
    d.u16()?;
    d.array()?;
    d.skip()?;
    let mut segs: [Vec<u8>; 4] = Default::default();
    for s in &mut segs {
        let start = d.position();
        d.skip()?;
        *s = raw[start..d.position()].to_vec();
    }
    Ok(segs)
}

/// Assemble a Conway block.
///
/// # Errors
/// [`ProduceError`].
pub fn assemble(
    number: u64,
    slot: u64,
    prev_hash: Option<Hash<32>>,
    protocol_version: (u64, u64),
    txs: &[&[u8]],
) -> Result<ForgedBlock, ProduceError> {
    let segments = body_segments(txs)?;
    let size: usize = segments.iter().map(Vec::len).sum();
    let header = Header {
        header_body: HeaderBody {
            block_number: number,
            slot,
            prev_hash,
            issuer_vkey: Bytes::from(vec![0x11; 32]),
            vrf_vkey: Bytes::from(vec![0x22; 32]),
            vrf_result: VrfCert(Bytes::from(vec![0x33; 64]), Bytes::from(vec![0x44; 80])),
            block_body_size: size as u64,
            block_body_hash: body_hash(&segments),
            operational_cert: OperationalCert {
                operational_cert_hot_vkey: Bytes::from(vec![0x55; 32]),
                operational_cert_sequence_number: 0,
                operational_cert_kes_period: 0,
                operational_cert_sigma: Bytes::from(vec![0x66; 64]),
            },
            protocol_version,
        },
        body_signature: Bytes::from(vec![0x77; 448]),
    };
    let header_cbor = minicbor::to_vec(&header).map_err(enc_err)?;
    let hash = Hasher::<256>::hash(&header_cbor);
    let mut wrapped = Vec::with_capacity(header_cbor.len() + size + 8);
    {
        let mut e = minicbor::Encoder::new(&mut wrapped);
        e.array(2).map_err(enc_err)?;
        e.u16(CONWAY_BLOCK_ERA).map_err(enc_err)?;
        e.array(5).map_err(enc_err)?;
    }
    wrapped.extend_from_slice(&header_cbor);
    for s in &segments {
        wrapped.extend_from_slice(s);
    }
    Ok(ForgedBlock {
        number,
        slot,
        hash,
        prev_hash,
        header: header_cbor,
        wrapped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pallas_traverse::MultiEraBlock;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!(
            "{}/../../shared/fixtures/cardano/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("fixture present");
        hex::decode(text.trim()).expect("hex")
    }

    #[test]
    fn an_empty_block_decodes_and_its_body_hash_verifies() {
        let b = assemble(1, 5, None, (10, 0), &[]).expect("assemble");
        let m = MultiEraBlock::decode(&b.wrapped).expect("decodes");
        assert_eq!(m.hash(), b.hash);
        assert_eq!(m.slot(), 5);
        assert_eq!(m.number(), 1);
        assert_eq!(m.tx_count(), 0);
    }

    #[test]
    fn real_conway_blocks_reassembled_from_their_tx_bytes_keep_their_body_hash() {
        // Rebuild each real block's transactions from their original bytes, assemble the
        // body with our code, and compare with the hash the real header declares.
        for name in [
            "conway1.block",
            "conway2.block",
            "conway3.block",
            "conway4.block",
        ] {
            let raw = fixture(name);
            let m = MultiEraBlock::decode(&raw).expect("fixture decodes");
            let block = m.as_conway().expect("conway");
            let declared = block.header.header_body.block_body_hash;
            let invalid = block.invalid_transactions.clone().unwrap_or_default();
            let txs: Vec<Vec<u8>> = (0..block.transaction_bodies.len())
                .map(|i| {
                    let mut t = vec![0x84];
                    t.extend_from_slice(block.transaction_bodies[i].raw_cbor());
                    t.extend_from_slice(block.transaction_witness_sets[i].raw_cbor());
                    t.push(if invalid.contains(&(i as u32)) {
                        0xf4
                    } else {
                        0xf5
                    });
                    match block.auxiliary_data_set.get(&(i as u32)) {
                        Some(a) => t.extend_from_slice(a.raw_cbor()),
                        None => t.push(0xf6),
                    }
                    t
                })
                .collect();
            let segs = body_segments(&txs.iter().map(Vec::as_slice).collect::<Vec<_>>())
                .expect("segments");
            assert_eq!(body_hash(&segs), declared, "{name}");
            assert_eq!(
                body_hash(&raw_body_segments(&raw).expect("segments")),
                declared,
                "{name} raw"
            );
        }
    }

    #[test]
    fn forged_blocks_keep_tx_bytes_aux_data_and_invalid_flags() {
        use crate::txbuild::{TxSpec, aux_hash, build};
        let aux = vec![0xa1, 0x01, 0x02];
        let with_aux = build(
            &TxSpec {
                fee: 7,
                auxiliary_data: Some(aux.clone()),
                auxiliary_data_hash: Some(aux_hash(&aux)),
                ..Default::default()
            },
            &[],
        );
        let invalid = build(
            &TxSpec {
                fee: 8,
                invalid: true,
                ..Default::default()
            },
            &[],
        );
        let b = assemble(
            3,
            9,
            Some(Hash::new([1; 32])),
            (10, 0),
            &[&with_aux, &invalid],
        )
        .expect("assemble");
        let m = MultiEraBlock::decode(&b.wrapped).expect("decodes");
        let txs = m.txs();
        assert_eq!(txs.len(), 2);
        assert_eq!(
            crate::ledger::tx_hash(&crate::ledger::decode_tx(&with_aux).expect("tx")),
            txs[0].hash()
        );
        assert!(m.has_aux_data());
        assert!(txs[0].is_valid() && !txs[1].is_valid());
        let declared = m
            .as_conway()
            .expect("conway")
            .header
            .header_body
            .block_body_hash;
        assert_eq!(
            body_hash(&raw_body_segments(&b.wrapped).expect("segments")),
            declared
        );
        assert_eq!(m.header().previous_hash(), Some(Hash::new([1; 32])));
    }
}
