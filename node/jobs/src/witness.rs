//! Joining a CIP-30 wallet's witness set to the unsigned transaction it signed.
//!
//! CIP-30 `signTx(tx, partialSign)` returns a `transaction_witness_set` (CBOR) holding the
//! wallet's vkey witnesses only. [`assemble`] splices those witnesses into the transaction's own
//! witness set (which carries the redeemers, datums and scripts the builder put there), keeping
//! the body's bytes — hence the transaction id — and every other witness entry byte for byte.
//! Each witness must be a valid ed25519 signature over the transaction id (blake2b-256 of the
//! body, Cardano ledger spec "vkey witnesses"), so a wrong or corrupted signature is refused
//! here, with a reason, before the ledger sees it.

use ed25519_dalek::{Signature, VerifyingKey};
use ganglion_contracts::tx::body_hash;
use pallas_codec::minicbor::data::{Tag, Type};
use pallas_codec::minicbor::{Decoder, Encoder};

/// CBOR tag 258: a set (Conway encodes witness lists either tagged or as plain arrays).
const SET_TAG: u64 = 258;

/// Why a transaction and a witness set could not be joined.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum WitnessError {
    /// The transaction is not a Conway transaction `[body, witness_set, is_valid, aux]`.
    #[error("transaction CBOR: {0}")]
    Transaction(String),
    /// The witness set is not a CBOR map of witness entries.
    #[error("witness set CBOR: {0}")]
    WitnessSet(String),
    /// The witness set holds no vkey witness.
    #[error("the witness set holds no vkey witness (key 0)")]
    NoWitness,
    /// A vkey witness does not verify over the transaction id.
    #[error("vkey witness {index} ({vkey}) is not a valid signature of transaction {tx_id}")]
    BadSignature {
        /// Position in the witness set.
        index: usize,
        /// The verification key, hex.
        vkey: String,
        /// The transaction id, hex.
        tx_id: String,
    },
}

/// A vkey witness: 32-byte ed25519 verification key, 64-byte signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VKeyWitness {
    /// Verification key bytes.
    pub vkey: Vec<u8>,
    /// Signature bytes.
    pub signature: Vec<u8>,
}

/// A transaction with its witnesses joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembled {
    /// Transaction id (blake2b-256 of the unchanged body).
    pub tx_id: [u8; 32],
    /// The signed transaction CBOR.
    pub bytes: Vec<u8>,
}

fn cbor<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// The raw byte spans of a CBOR map's entries: `(key, value bytes)`, in order.
fn map_entries(d: &mut Decoder<'_>, bytes: &[u8]) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let n = d
        .map()
        .map_err(cbor("map header"))?
        .ok_or("indefinite-length map")?;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let k = d.u64().map_err(cbor("map key"))?;
        let start = d.position();
        d.skip().map_err(cbor("map value"))?;
        out.push((k, bytes[start..d.position()].to_vec()));
    }
    Ok(out)
}

/// Decodes the vkey witnesses of a witness-set entry 0 (a plain or tag-258 array of
/// `[vkey, signature]`).
fn vkey_witnesses(value: &[u8]) -> Result<Vec<VKeyWitness>, String> {
    let mut d = Decoder::new(value);
    if d.datatype().map_err(cbor("witness list"))? == Type::Tag {
        let t = d.tag().map_err(cbor("witness list tag"))?;
        if t != Tag::new(SET_TAG) {
            return Err(format!("unexpected tag {t:?} on the vkey witnesses"));
        }
    }
    let n = d
        .array()
        .map_err(cbor("witness list"))?
        .ok_or("indefinite-length witness list")?;
    (0..n)
        .map(|_| {
            let len = d.array().map_err(cbor("vkey witness"))?;
            if len != Some(2) {
                return Err("a vkey witness is not [vkey, signature]".to_string());
            }
            let vkey = d.bytes().map_err(cbor("vkey"))?.to_vec();
            let signature = d.bytes().map_err(cbor("signature"))?.to_vec();
            Ok(VKeyWitness { vkey, signature })
        })
        .collect()
}

fn encode_witnesses(ws: &[VKeyWitness]) -> Vec<u8> {
    let mut e = Encoder::new(Vec::new());
    // Writing into a Vec cannot fail.
    let _ = e
        .tag(Tag::new(SET_TAG))
        .and_then(|e| e.array(ws.len() as u64));
    for w in ws {
        let _ = e
            .array(2)
            .and_then(|e| e.bytes(&w.vkey))
            .and_then(|e| e.bytes(&w.signature));
    }
    e.into_writer()
}

/// Checks that `w` signs `tx_id` (ed25519, strict).
fn verify(index: usize, w: &VKeyWitness, tx_id: &[u8; 32]) -> Result<(), WitnessError> {
    let bad = || WitnessError::BadSignature {
        index,
        vkey: hex::encode(&w.vkey),
        tx_id: hex::encode(tx_id),
    };
    let vkey: [u8; 32] = w.vkey.as_slice().try_into().map_err(|_| bad())?;
    let key = VerifyingKey::from_bytes(&vkey).map_err(|_| bad())?;
    let sig = Signature::from_slice(&w.signature).map_err(|_| bad())?;
    key.verify_strict(tx_id, &sig).map_err(|_| bad())
}

/// The id of a Conway transaction: blake2b-256 of its body's bytes as they are.
///
/// # Errors
/// [`WitnessError::Transaction`] when `tx` is not `[body, ...]` CBOR.
pub fn tx_id(tx: &[u8]) -> Result<[u8; 32], WitnessError> {
    let mut d = Decoder::new(tx);
    d.array()
        .map_err(|e| WitnessError::Transaction(format!("array header: {e}")))?;
    let start = d.position();
    d.skip()
        .map_err(|e| WitnessError::Transaction(format!("body: {e}")))?;
    Ok(body_hash(&tx[start..d.position()]))
}

/// Joins the vkey witnesses of `witness_set` (CIP-30 `signTx`'s answer) to `tx` (the unsigned
/// transaction, e.g. from `job_buildLock`). Witnesses already in `tx` stay, unless the new set
/// has one for the same key (then the new one counts). The body and every non-vkey witness
/// entry keep their bytes.
///
/// # Errors
/// [`WitnessError::Transaction`], [`WitnessError::WitnessSet`] for malformed CBOR,
/// [`WitnessError::NoWitness`] for a set without vkey witnesses,
/// [`WitnessError::BadSignature`] for a witness that does not sign the transaction id.
pub fn assemble(tx: &[u8], witness_set: &[u8]) -> Result<Assembled, WitnessError> {
    let terr = WitnessError::Transaction;
    let mut d = Decoder::new(tx);
    let n = d.array().map_err(|e| terr(format!("array header: {e}")))?;
    if n != Some(4) {
        return Err(terr(format!(
            "expected [body, witness_set, is_valid, aux], got an array of {n:?}"
        )));
    }
    let body_start = d.position();
    d.skip().map_err(|e| terr(format!("body: {e}")))?;
    let body = &tx[body_start..d.position()];
    let id = body_hash(body);
    let mut entries = map_entries(&mut d, tx).map_err(terr)?;
    let rest_start = d.position();
    d.skip().map_err(|e| terr(format!("is_valid: {e}")))?;
    d.skip().map_err(|e| terr(format!("auxiliary data: {e}")))?;
    if d.position() != tx.len() {
        return Err(terr(format!("{} trailing bytes", tx.len() - d.position())));
    }
    let rest = &tx[rest_start..];

    let werr = WitnessError::WitnessSet;
    let mut wd = Decoder::new(witness_set);
    let given = map_entries(&mut wd, witness_set).map_err(werr)?;
    if wd.position() != witness_set.len() {
        return Err(werr("trailing bytes".into()));
    }
    let new = match given.iter().find(|(k, _)| *k == 0) {
        Some((_, v)) => vkey_witnesses(v).map_err(werr)?,
        None => Vec::new(),
    };
    if new.is_empty() {
        return Err(WitnessError::NoWitness);
    }
    for (i, w) in new.iter().enumerate() {
        verify(i, w, &id)?;
    }
    let mut all = match entries.iter().position(|(k, _)| *k == 0) {
        Some(i) => vkey_witnesses(&entries.remove(i).1).map_err(terr)?,
        None => Vec::new(),
    };
    all.retain(|old| !new.iter().any(|w| w.vkey == old.vkey));
    all.extend(new);
    entries.push((0, encode_witnesses(&all)));
    entries.sort_by_key(|(k, _)| *k);

    let mut e = Encoder::new(Vec::with_capacity(tx.len() + 100 * all.len()));
    let _ = e.array(4);
    let mut out = e.into_writer();
    out.extend_from_slice(body);
    let mut e = Encoder::new(out);
    let _ = e.map(entries.len() as u64);
    let mut out = e.into_writer();
    for (k, v) in &entries {
        let mut e = Encoder::new(out);
        let _ = e.u64(*k);
        out = e.into_writer();
        out.extend_from_slice(v);
    }
    out.extend_from_slice(rest);
    Ok(Assembled {
        tx_id: id,
        bytes: out,
    })
}

/// A witness set (CBOR map) holding vkey witnesses by `keys` over `tx_id`: what a CIP-30
/// wallet's `signTx` returns. For tests and for tools that hold keys outside the node.
pub fn witness_set(tx_id: &[u8; 32], keys: &[&ed25519_dalek::SigningKey]) -> Vec<u8> {
    use ed25519_dalek::Signer;
    let ws: Vec<VKeyWitness> = keys
        .iter()
        .map(|k| VKeyWitness {
            vkey: k.verifying_key().to_bytes().to_vec(),
            signature: k.sign(tx_id).to_bytes().to_vec(),
        })
        .collect();
    let mut e = Encoder::new(Vec::new());
    let _ = e.map(1).and_then(|e| e.u64(0));
    let mut out = e.into_writer();
    out.extend_from_slice(&encode_witnesses(&ws));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    /// `[body {0: [], 1: [], 2: 170000}, {5: h'beef'}, true, null]`: a witness set with a
    /// non-vkey entry that must survive byte for byte.
    fn unsigned() -> Vec<u8> {
        let mut e = Encoder::new(Vec::new());
        e.array(4).unwrap();
        e.map(3).unwrap();
        e.u64(0).unwrap().array(0).unwrap();
        e.u64(1).unwrap().array(0).unwrap();
        e.u64(2).unwrap().u64(170_000).unwrap();
        e.map(1)
            .unwrap()
            .u64(5)
            .unwrap()
            .bytes(&[0xbe, 0xef])
            .unwrap();
        e.bool(true).unwrap().null().unwrap();
        e.into_writer()
    }

    #[test]
    fn joined_witnesses_verify_and_the_id_and_other_entries_stay() {
        let tx = unsigned();
        let id = tx_id(&tx).expect("id");
        let key = SigningKey::from_bytes(&[7; 32]);
        let signed = assemble(&tx, &witness_set(&id, &[&key])).expect("assembled");
        assert_eq!(signed.tx_id, id);
        assert_eq!(tx_id(&signed.bytes).expect("id"), id, "body unchanged");
        let mut d = Decoder::new(&signed.bytes);
        d.array().unwrap();
        d.skip().unwrap();
        let entries = map_entries(&mut d, &signed.bytes).expect("map");
        assert_eq!(entries.iter().map(|e| e.0).collect::<Vec<_>>(), [0, 5]);
        assert_eq!(entries[1].1, [0x42, 0xbe, 0xef], "redeemer-like entry kept");
        let ws = vkey_witnesses(&entries[0].1).expect("witnesses");
        assert_eq!(ws.len(), 1);
        assert_eq!(ws[0].vkey, key.verifying_key().to_bytes());
        verify(0, &ws[0], &id).expect("signature verifies");
        // Signing again with the same key replaces, a second key adds.
        let other = SigningKey::from_bytes(&[8; 32]);
        let twice = assemble(&signed.bytes, &witness_set(&id, &[&key, &other])).expect("again");
        let mut d = Decoder::new(&twice.bytes);
        d.array().unwrap();
        d.skip().unwrap();
        let entries = map_entries(&mut d, &twice.bytes).expect("map");
        assert_eq!(vkey_witnesses(&entries[0].1).expect("ws").len(), 2);
    }

    #[test]
    fn a_signature_over_anything_else_is_refused() {
        let tx = unsigned();
        let key = SigningKey::from_bytes(&[7; 32]);
        let e = assemble(&tx, &witness_set(&[0; 32], &[&key])).expect_err("wrong message");
        assert!(
            matches!(e, WitnessError::BadSignature { index: 0, .. }),
            "{e}"
        );
    }

    #[test]
    fn malformed_inputs_are_typed_errors() {
        let tx = unsigned();
        let id = tx_id(&tx).expect("id");
        let key = SigningKey::from_bytes(&[7; 32]);
        let ws = witness_set(&id, &[&key]);
        assert!(matches!(
            assemble(&[0x83, 0x01], &ws),
            Err(WitnessError::Transaction(_))
        ));
        assert!(matches!(
            assemble(&tx[..tx.len() - 1], &ws),
            Err(WitnessError::Transaction(_))
        ));
        assert!(matches!(
            assemble(&tx, &[0x01]),
            Err(WitnessError::WitnessSet(_))
        ));
        assert_eq!(assemble(&tx, &[0xa0]), Err(WitnessError::NoWitness));
        let mut trailing = tx.clone();
        trailing.push(0);
        assert!(matches!(
            assemble(&trailing, &ws),
            Err(WitnessError::Transaction(_))
        ));
    }
}
