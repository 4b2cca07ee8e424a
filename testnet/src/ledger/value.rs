//! Multi-asset values with exact signed arithmetic (lovelace and native assets).

use std::collections::BTreeMap;
use std::fmt;

use pallas_primitives::conway;

/// An asset id: (policy id 28 B, asset name ≤ 32 B).
pub type AssetId = (Vec<u8>, Vec<u8>);

/// A value: lovelace plus native-asset quantities. Signed so that mint (which may burn)
/// and differences can be represented; an output's value is never negative.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Value {
    /// Lovelace.
    pub coin: i128,
    /// Native assets by (policy id, asset name); zero entries are never stored.
    pub assets: BTreeMap<AssetId, i128>,
}

impl Value {
    /// A pure-ADA value of `lovelace`.
    pub fn lovelace(lovelace: u64) -> Self {
        Self {
            coin: i128::from(lovelace),
            assets: BTreeMap::new(),
        }
    }

    /// Add `quantity` of an asset.
    pub fn add_asset(&mut self, policy: &[u8], name: &[u8], quantity: i128) {
        let key = (policy.to_vec(), name.to_vec());
        let entry = self.assets.entry(key.clone()).or_insert(0);
        *entry += quantity;
        if *entry == 0 {
            self.assets.remove(&key);
        }
    }

    /// Add another value into this one.
    pub fn add(&mut self, other: &Value) {
        self.coin += other.coin;
        for ((p, n), q) in &other.assets {
            self.add_asset(p, n, *q);
        }
    }

    /// True when the value holds no native assets.
    pub fn is_ada_only(&self) -> bool {
        self.assets.is_empty()
    }

    /// The value of a Conway output's `value` field.
    pub fn from_conway(v: &conway::Value) -> Self {
        match v {
            conway::Value::Coin(c) => Self::lovelace(*c),
            conway::Value::Multiasset(c, ma) => {
                let mut out = Self::lovelace(*c);
                for (policy, names) in ma.iter() {
                    for (name, q) in names.iter() {
                        out.add_asset(policy.as_ref(), name.as_ref(), i128::from(u64::from(q)));
                    }
                }
                out
            }
        }
    }

    /// The value of a pre-Babbage (legacy) output.
    pub fn from_alonzo(v: &pallas_primitives::alonzo::Value) -> Self {
        match v {
            pallas_primitives::alonzo::Value::Coin(c) => Self::lovelace(*c),
            pallas_primitives::alonzo::Value::Multiasset(c, ma) => {
                let mut out = Self::lovelace(*c);
                for (policy, names) in ma.iter() {
                    for (name, q) in names.iter() {
                        out.add_asset(policy.as_ref(), name.as_ref(), i128::from(*q));
                    }
                }
                out
            }
        }
    }

    /// The value of a transaction's `mint` field (negative quantities burn).
    pub fn from_mint(mint: &conway::Mint) -> Self {
        let mut out = Self::default();
        for (policy, names) in mint.iter() {
            for (name, q) in names.iter() {
                out.add_asset(policy.as_ref(), name.as_ref(), i128::from(i64::from(q)));
            }
        }
        out
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} lovelace", self.coin)?;
        for ((p, n), q) in &self.assets {
            write!(f, " + {q} {}.{}", hex::encode(p), hex::encode(n))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_and_burning_assets_cancels_entries() {
        let mut v = Value::lovelace(5);
        v.add_asset(&[1; 28], b"NTX", 10);
        let mut burn = Value::default();
        burn.add_asset(&[1; 28], b"NTX", -10);
        v.add(&burn);
        assert!(v.is_ada_only());
        assert_eq!(v, Value::lovelace(5));
        assert_eq!(v.to_string(), "5 lovelace");
    }
}
