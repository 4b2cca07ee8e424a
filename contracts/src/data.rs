//! PlutusData building blocks in the exact encoding of the Plutus builtin `serialiseData`.
//!
//! `serialiseData` (plutus-core `Data` CBOR, CIP-0042 era) writes non-empty lists and
//! constructor fields as indefinite-length arrays, empty ones as `[]`, maps with definite
//! length, bytestrings above 64 bytes in 64-byte chunks, and constructor `i` with CBOR tag
//! `121 + i` (i < 7), `1280 + i - 7` (i < 128) or `102`. Building values through these helpers
//! makes the bytes signed off-chain equal the bytes a validator rebuilds on-chain.

use pallas_codec::utils::{Int, KeyValuePairs, MaybeIndefArray};
use pallas_primitives::{BigInt, BoundedBytes, Constr, PlutusData};

use crate::error::{Error, Result};

fn array(items: Vec<PlutusData>) -> MaybeIndefArray<PlutusData> {
    if items.is_empty() {
        MaybeIndefArray::Def(items)
    } else {
        MaybeIndefArray::Indef(items)
    }
}

/// Constructor `index` with `fields`.
pub fn constr(index: u64, fields: Vec<PlutusData>) -> PlutusData {
    let (tag, any_constructor) = match index {
        0..=6 => (121 + index, None),
        7..=127 => (1280 + index - 7, None),
        _ => (102, Some(index)),
    };
    PlutusData::Constr(Constr {
        tag,
        any_constructor,
        fields: array(fields),
    })
}

/// A list.
pub fn list(items: Vec<PlutusData>) -> PlutusData {
    PlutusData::Array(array(items))
}

/// A map, in the given key order.
pub fn map(entries: Vec<(PlutusData, PlutusData)>) -> PlutusData {
    PlutusData::Map(KeyValuePairs::Def(entries))
}

/// A bytestring.
pub fn bytes(b: impl Into<Vec<u8>>) -> PlutusData {
    PlutusData::BoundedBytes(BoundedBytes::from(b.into()))
}

/// An integer (any `i128`; beyond 64 bits it becomes a CBOR bignum).
pub fn int(i: impl Into<i128>) -> PlutusData {
    let i: i128 = i.into();
    match Int::try_from(i) {
        Ok(small) => PlutusData::BigInt(BigInt::Int(small)),
        Err(_) => {
            let magnitude = if i < 0 { -(i + 1) } else { i } as u128;
            let be = magnitude.to_be_bytes();
            let first = be.iter().position(|b| *b != 0).unwrap_or(be.len() - 1);
            let b = BoundedBytes::from(be[first..].to_vec());
            PlutusData::BigInt(if i < 0 {
                BigInt::BigNInt(b)
            } else {
                BigInt::BigUInt(b)
            })
        }
    }
}

/// `Option<a>` as Aiken and Plutus encode it: `Some` = constructor 0, `None` = 1.
pub fn option(value: Option<PlutusData>) -> PlutusData {
    match value {
        Some(v) => constr(0, vec![v]),
        None => constr(1, vec![]),
    }
}

/// CBOR bytes of a PlutusData value, as `serialiseData` would produce them.
pub fn to_cbor(data: &PlutusData) -> Vec<u8> {
    // Encoding into a Vec cannot fail.
    pallas_codec::minicbor::to_vec(data).unwrap_or_default()
}

/// Decodes CBOR bytes into PlutusData.
///
/// # Errors
/// [`Error::Cbor`] when the bytes are not PlutusData.
pub fn from_cbor(what: &'static str, bytes: &[u8]) -> Result<PlutusData> {
    pallas_codec::minicbor::decode(bytes).map_err(|e| Error::Cbor {
        what,
        reason: e.to_string(),
    })
}

/// Constructor index of a `Constr` tag, or `None` for non-constructor data.
pub fn constr_index(c: &Constr<PlutusData>) -> Option<u64> {
    match c.tag {
        121..=127 => Some(c.tag - 121),
        1280..=1400 => Some(c.tag - 1280 + 7),
        102 => c.any_constructor,
        _ => None,
    }
}

/// Reads the fields of constructor data one by one, with errors that name the type and field.
pub struct Fields<'a> {
    what: &'static str,
    fields: std::slice::Iter<'a, PlutusData>,
}

/// Splits constructor data into its index and a field reader.
///
/// # Errors
/// [`Error::MalformedData`] when `data` is not a constructor.
pub fn fields<'a>(what: &'static str, data: &'a PlutusData) -> Result<(u64, Fields<'a>)> {
    match data {
        PlutusData::Constr(c) => {
            let index =
                constr_index(c).ok_or_else(|| malformed(what, "unknown constructor tag"))?;
            Ok((
                index,
                Fields {
                    what,
                    fields: c.fields.iter(),
                },
            ))
        }
        _ => Err(malformed(what, "expected a constructor")),
    }
}

/// Like [`fields`], but insists on constructor `index` with exactly `arity` fields.
///
/// # Errors
/// [`Error::MalformedData`] on any other shape.
pub fn record<'a>(
    what: &'static str,
    data: &'a PlutusData,
    index: u64,
    arity: usize,
) -> Result<Fields<'a>> {
    let (i, f) = fields(what, data)?;
    if i != index {
        return Err(malformed(
            what,
            format!("constructor {i}, expected {index}"),
        ));
    }
    if f.fields.len() != arity {
        return Err(malformed(
            what,
            format!("{} fields, expected {arity}", f.fields.len()),
        ));
    }
    Ok(f)
}

pub(crate) fn malformed(what: &'static str, reason: impl Into<String>) -> Error {
    Error::MalformedData {
        what,
        reason: reason.into(),
    }
}

impl<'a> Fields<'a> {
    /// The next field, raw.
    ///
    /// # Errors
    /// [`Error::MalformedData`] when the fields ran out.
    pub fn next_data(&mut self, field: &str) -> Result<&'a PlutusData> {
        self.fields
            .next()
            .ok_or_else(|| malformed(self.what, format!("missing field {field}")))
    }

    /// The next field as a bytestring.
    ///
    /// # Errors
    /// [`Error::MalformedData`] when absent or not bytes.
    pub fn bytes(&mut self, field: &str) -> Result<Vec<u8>> {
        match self.next_data(field)? {
            PlutusData::BoundedBytes(b) => Ok(b.to_vec()),
            _ => Err(malformed(self.what, format!("{field}: expected bytes"))),
        }
    }

    /// The next field as a bytestring of exactly `N` bytes.
    ///
    /// # Errors
    /// [`Error::MalformedData`] when absent, not bytes or of another length.
    pub fn fixed<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let b = self.bytes(field)?;
        let len = b.len();
        b.try_into()
            .map_err(|_| malformed(self.what, format!("{field}: {len} bytes, expected {N}")))
    }

    /// The next field as an integer.
    ///
    /// # Errors
    /// [`Error::MalformedData`] when absent or not an integer.
    pub fn int(&mut self, field: &str) -> Result<i128> {
        let what = self.what;
        as_int(self.next_data(field)?)
            .ok_or_else(|| malformed(what, format!("{field}: expected an integer")))
    }

    /// The next field as a non-negative integer that fits `u64`.
    ///
    /// # Errors
    /// [`Error::MalformedData`] when absent, negative or too large.
    pub fn uint(&mut self, field: &str) -> Result<u64> {
        let i = self.int(field)?;
        u64::try_from(i).map_err(|_| malformed(self.what, format!("{field}: {i} out of range")))
    }

    /// The next field as a list.
    ///
    /// # Errors
    /// [`Error::MalformedData`] when absent or not a list.
    pub fn list(&mut self, field: &str) -> Result<&'a [PlutusData]> {
        match self.next_data(field)? {
            PlutusData::Array(a) => Ok(a.as_slice()),
            _ => Err(malformed(self.what, format!("{field}: expected a list"))),
        }
    }
}

/// The integer inside `data`, if it is one (bignums included, up to 128 bits).
pub fn as_int(data: &PlutusData) -> Option<i128> {
    match data {
        PlutusData::BigInt(BigInt::Int(i)) => Some(i128::from(*i)),
        PlutusData::BigInt(BigInt::BigUInt(b)) if b.len() <= 15 => {
            Some(b.iter().fold(0i128, |acc, x| (acc << 8) | i128::from(*x)))
        }
        PlutusData::BigInt(BigInt::BigNInt(b)) if b.len() <= 15 => {
            Some(-1 - b.iter().fold(0i128, |acc, x| (acc << 8) | i128::from(*x)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constr_tags_follow_the_plutus_encoding() {
        assert_eq!(hex::encode(to_cbor(&constr(0, vec![]))), "d87980");
        assert_eq!(hex::encode(to_cbor(&constr(1, vec![int(1)]))), "d87a9f01ff");
        assert_eq!(hex::encode(to_cbor(&constr(7, vec![]))), "d9050080");
        assert_eq!(hex::encode(to_cbor(&constr(200, vec![]))), "d8668218c880");
    }

    #[test]
    fn long_bytestrings_are_chunked_like_serialise_data() {
        let cbor = to_cbor(&bytes(vec![7u8; 65]));
        assert_eq!(cbor[0], 0x5f, "indefinite bytestring");
        assert_eq!(*cbor.last().unwrap_or(&0), 0xff);
    }

    #[test]
    fn big_integers_round_trip() {
        for i in [
            0i128,
            -1,
            i64::MAX as i128 + 1,
            -(i64::MAX as i128) - 10,
            u64::MAX as i128 * 3,
        ] {
            let d = from_cbor("int", &to_cbor(&int(i))).unwrap();
            assert_eq!(as_int(&d), Some(i), "{i}");
        }
    }
}
