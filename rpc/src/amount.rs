//! Amounts over JSON-RPC: lovelace (ADA) and NTX base units as decimal **strings**.
//!
//! A JSON number is a double in JavaScript (and in many JSON libraries), exact only up to
//! 2^53 − 1, while a Cardano output holds up to 2^64 − 1 of a coin or asset (`Coin` and
//! `PositiveCoin` are `uint64` in the Conway CDDL). So every amount the node answers with is a
//! string of decimal digits, `"18446744073709551615"`, and every amount it takes may be that
//! string or a bare JSON integer, parsed exactly. Anything else — a sign (`-1`, `"+7"`), a
//! fraction or exponent (`1.5`, `1e3`), another base (`"0x10"`), a value above 2^64 − 1 — is an
//! [`InvalidAmount`] that names the field, answered as JSON-RPC invalid params.
//!
//! [`Amount`] is the type of every amount field of the API's types. Method parameters that
//! are amounts are [`AmountParam`]s, which take any JSON and are parsed in the method with
//! [`AmountParam::parse`], so that the error names the parameter (a serde error cannot).

use std::fmt;
use std::str::FromStr;

use jsonrpsee::types::ErrorObjectOwned;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A lovelace or NTX-base-unit amount, 0 … 2^64 − 1. Serialized as a decimal string;
/// deserialized from a decimal string or a JSON integer (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount(pub u64);

impl Amount {
    /// The largest amount, 2^64 − 1 (`uint64` of the Conway CDDL).
    pub const MAX: Amount = Amount(u64::MAX);

    /// The amount in base units (lovelace or NTX base units).
    pub fn get(self) -> u64 {
        self.0
    }

    /// Parses a JSON value that is an amount: a decimal string or a non-negative JSON integer.
    ///
    /// # Errors
    /// [`InvalidAmount`] naming `field`, with the rule the value breaks.
    pub fn from_json(field: &str, value: &serde_json::Value) -> Result<Amount, InvalidAmount> {
        let invalid = |input: String, rule| InvalidAmount {
            field: field.to_string(),
            input,
            rule,
        };
        match value {
            serde_json::Value::String(s) => {
                parse_decimal(s).map_err(|rule| invalid(format!("{s:?}"), rule))
            }
            serde_json::Value::Number(n) => {
                if let Some(v) = n.as_u64() {
                    Ok(Amount(v))
                } else if n.is_i64() {
                    Err(invalid(n.to_string(), AmountRule::Negative))
                } else {
                    let rule = n.as_f64().map_or(AmountRule::NotInteger, float_rule);
                    Err(invalid(n.to_string(), rule))
                }
            }
            other => Err(invalid(other.to_string(), AmountRule::NotStringOrInteger)),
        }
    }
}

/// Why a value is not an amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AmountRule {
    /// `""`.
    #[error("is empty")]
    Empty,
    /// `-1`, `"-1"`.
    #[error("is negative")]
    Negative,
    /// `"+7"`: a sign is not part of the decimal form.
    #[error("has a sign")]
    Sign,
    /// `"1.5"`, `"1e3"`, and every JSON number with a fraction or an exponent (`1.5`, `1e3`).
    #[error("is not a whole number in plain decimal digits (no fraction, no exponent)")]
    NotInteger,
    /// `"0x10"`, `"ten"`, `" 7"`: a character other than `0`–`9`.
    #[error("has a character other than the decimal digits 0-9")]
    NotDecimal,
    /// Above 2^64 − 1 (`18446744073709551616`).
    #[error("is above the largest amount 18446744073709551615 (2^64 - 1)")]
    TooLarge,
    /// `true`, `null`, an array or an object.
    #[error("is not a string or an integer")]
    NotStringOrInteger,
}

impl AmountRule {
    /// A short snake_case name of the rule (the error's `data.rule`).
    pub fn name(self) -> &'static str {
        match self {
            AmountRule::Empty => "empty",
            AmountRule::Negative => "negative",
            AmountRule::Sign => "sign",
            AmountRule::NotInteger => "not_integer",
            AmountRule::NotDecimal => "not_decimal",
            AmountRule::TooLarge => "too_large",
            AmountRule::NotStringOrInteger => "not_string_or_integer",
        }
    }
}

/// A value given for an amount field that is not an amount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid amount for `{field}`: {input} {rule}; an amount is a decimal string (or a JSON \
     integer) from 0 to 18446744073709551615 base units"
)]
pub struct InvalidAmount {
    /// The field or parameter, as the request names it (`lovelace`, `ntx`, …).
    pub field: String,
    /// The value given, as JSON text.
    pub input: String,
    /// The rule it breaks.
    pub rule: AmountRule,
}

impl From<InvalidAmount> for ErrorObjectOwned {
    /// JSON-RPC invalid params (`-32602`) with the readable message and
    /// `data: {"field", "input", "rule"}`.
    fn from(e: InvalidAmount) -> Self {
        let data = serde_json::json!({
            "field": e.field,
            "input": e.input,
            "rule": e.rule.name(),
        });
        ErrorObjectOwned::owned(crate::error::INVALID_PARAMS, e.to_string(), Some(data))
    }
}

/// The decimal form: one or more ASCII digits, nothing else, at most 2^64 − 1.
fn parse_decimal(s: &str) -> Result<Amount, AmountRule> {
    if s.is_empty() {
        return Err(AmountRule::Empty);
    }
    if let Some(rest) = s.strip_prefix('-') {
        return Err(if rest.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            AmountRule::Negative
        } else {
            AmountRule::NotDecimal
        });
    }
    if s.starts_with('+') {
        return Err(AmountRule::Sign);
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        let float_like = s
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
            && s.bytes().next().is_some_and(|b| b.is_ascii_digit());
        return Err(if float_like {
            AmountRule::NotInteger
        } else {
            AmountRule::NotDecimal
        });
    }
    // Digits only: the one failure left is overflow.
    s.parse::<u64>()
        .map(Amount)
        .map_err(|_| AmountRule::TooLarge)
}

/// The rule a JSON number that is neither `u64` nor `i64` breaks (serde_json reads such a
/// number as a double: a fraction, an exponent, or an integer beyond 64 bits).
fn float_rule(v: f64) -> AmountRule {
    if v < 0.0 {
        AmountRule::Negative
    } else if v.fract() == 0.0 && v >= 18_446_744_073_709_551_616.0 {
        AmountRule::TooLarge
    } else {
        AmountRule::NotInteger
    }
}

impl FromStr for Amount {
    type Err = AmountRule;

    /// The decimal form only (what a response carries).
    fn from_str(s: &str) -> Result<Self, AmountRule> {
        parse_decimal(s)
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<u64> for Amount {
    fn from(v: u64) -> Self {
        Amount(v)
    }
}

impl From<Amount> for u64 {
    fn from(a: Amount) -> Self {
        a.0
    }
}

impl PartialEq<u64> for Amount {
    fn eq(&self, other: &u64) -> bool {
        self.0 == *other
    }
}

impl PartialOrd<u64> for Amount {
    fn partial_cmp(&self, other: &u64) -> Option<std::cmp::Ordering> {
        self.0.partial_cmp(other)
    }
}

impl std::iter::Sum<Amount> for u64 {
    fn sum<I: Iterator<Item = Amount>>(iter: I) -> u64 {
        iter.map(|a| a.0).sum()
    }
}

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AmountVisitor)
    }
}

struct AmountVisitor;

impl AmountVisitor {
    fn refuse<E: de::Error>(input: String, rule: AmountRule) -> E {
        E::custom(format_args!(
            "invalid amount {input} {rule}; an amount is a decimal string (or a JSON integer) \
             from 0 to 18446744073709551615 base units"
        ))
    }
}

impl<'de> Visitor<'de> for AmountVisitor {
    type Value = Amount;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an amount: a decimal string or a JSON integer from 0 to 2^64 - 1")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Amount, E> {
        Ok(Amount(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Amount, E> {
        u64::try_from(v)
            .map(Amount)
            .map_err(|_| Self::refuse(v.to_string(), AmountRule::Negative))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Amount, E> {
        u64::try_from(v)
            .map(Amount)
            .map_err(|_| Self::refuse(v.to_string(), AmountRule::TooLarge))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Amount, E> {
        u64::try_from(v).map(Amount).map_err(|_| {
            let rule = if v < 0 {
                AmountRule::Negative
            } else {
                AmountRule::TooLarge
            };
            Self::refuse(v.to_string(), rule)
        })
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Amount, E> {
        Err(Self::refuse(v.to_string(), float_rule(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Amount, E> {
        parse_decimal(v).map_err(|rule| Self::refuse(format!("{v:?}"), rule))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Amount, E> {
        Err(Self::refuse(v.to_string(), AmountRule::NotStringOrInteger))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Amount, E> {
        Err(Self::refuse("null".into(), AmountRule::NotStringOrInteger))
    }
}

/// A method parameter that should be an amount, kept as the JSON given until the method
/// parses it with [`AmountParam::parse`] (so that an invalid one is refused naming the
/// parameter, not with serde's text). Serializes as the JSON it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AmountParam(pub serde_json::Value);

impl AmountParam {
    /// The amount, or why not, naming `field`.
    ///
    /// # Errors
    /// [`InvalidAmount`] (see [`Amount::from_json`]).
    pub fn parse(&self, field: &str) -> Result<Amount, InvalidAmount> {
        Amount::from_json(field, &self.0)
    }
}

impl From<Amount> for AmountParam {
    /// The response form: a decimal string.
    fn from(a: Amount) -> Self {
        AmountParam(serde_json::Value::String(a.to_string()))
    }
}

/// Decimals of NTX: one NTX is 10^6 base units (as ADA is 10^6 lovelace).
pub const NTX_DECIMALS: u32 = 6;

/// NTX base units as a person reads them: NTX with up to [`NTX_DECIMALS`] decimals, trailing
/// zeros dropped, and the unit (`1500000` → `"1.5 NTX"`, `555` → `"0.000555 NTX"`, `0` →
/// `"0 NTX"`). For display only: JSON answers keep base units ([`Amount`]).
pub fn ntx_text(base_units: u64) -> String {
    let one = 10u64.pow(NTX_DECIMALS);
    let (whole, frac) = (base_units / one, base_units % one);
    if frac == 0 {
        return format!("{whole} NTX");
    }
    let digits = format!("{frac:0width$}", width = NTX_DECIMALS as usize);
    format!("{whole}.{} NTX", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every refused case of `shared/fixtures/field/README.md` ("Amounts over JSON-RPC"), as
    /// a string and, where JSON can write it, as a bare number.
    #[test]
    fn the_readme_cases_are_refused_with_their_rule_and_field() {
        let cases: [(serde_json::Value, AmountRule); 11] = [
            (json!(-1), AmountRule::Negative),
            (json!("-1"), AmountRule::Negative),
            (json!(1.5), AmountRule::NotInteger),
            (json!("1.5"), AmountRule::NotInteger),
            (
                serde_json::from_str("1e3").expect("json"),
                AmountRule::NotInteger,
            ),
            (json!("1e3"), AmountRule::NotInteger),
            (json!("+7"), AmountRule::Sign),
            (json!("0x10"), AmountRule::NotDecimal),
            (json!("18446744073709551616"), AmountRule::TooLarge),
            (
                serde_json::from_str("18446744073709551616").expect("json"),
                AmountRule::TooLarge,
            ),
            (json!(""), AmountRule::Empty),
        ];
        for (value, rule) in cases {
            let e = Amount::from_json("lovelace", &value).expect_err("refused");
            assert_eq!(e.rule, rule, "{value}");
            assert_eq!(e.field, "lovelace");
            let msg = e.to_string();
            assert!(msg.starts_with("invalid amount for `lovelace`: "), "{msg}");
            // The serde path refuses it too, with the same rule in words.
            let serde_err = serde_json::from_value::<Amount>(value.clone()).expect_err("serde");
            assert!(
                serde_err.to_string().contains(&rule.to_string()),
                "{value}: {serde_err}"
            );
        }
        for other in [json!(true), json!(null), json!([1]), json!({"n": 1})] {
            let e = Amount::from_json("ntx", &other).expect_err("refused");
            assert_eq!(e.rule, AmountRule::NotStringOrInteger, "{other}");
        }
    }

    #[test]
    fn strings_and_integers_parse_exactly_up_to_two_to_the_64_minus_one() {
        for (value, want) in [
            (json!("0"), 0),
            (json!(0), 0),
            (json!("4000000"), 4_000_000),
            (json!(4_000_000), 4_000_000),
            // 2^53 + 1: a double would round it to 2^53.
            (json!("9007199254740993"), 9_007_199_254_740_993),
            (json!(9_007_199_254_740_993u64), 9_007_199_254_740_993),
            (json!("18446744073709551615"), u64::MAX),
            (json!(u64::MAX), u64::MAX),
        ] {
            let a = Amount::from_json("ntx", &value).expect("an amount");
            assert_eq!(a.get(), want, "{value}");
            assert_eq!(serde_json::from_value::<Amount>(value).expect("serde"), a);
        }
    }

    #[test]
    fn responses_carry_decimal_strings_that_round_trip() {
        let a = Amount::MAX;
        let text = serde_json::to_string(&a).expect("json");
        assert_eq!(text, "\"18446744073709551615\"");
        assert_eq!(serde_json::from_str::<Amount>(&text).expect("back"), a);
        assert_eq!("18446744073709551615".parse::<Amount>(), Ok(a));
        assert_eq!(AmountParam::from(a).parse("lovelace"), Ok(a));
    }

    #[test]
    fn the_rpc_error_is_invalid_params_with_the_field_in_data() {
        let e: ErrorObjectOwned = Amount::from_json("ntx", &json!("0x10"))
            .expect_err("refused")
            .into();
        assert_eq!(e.code(), crate::error::INVALID_PARAMS);
        assert!(e.message().contains("`ntx`"), "{}", e.message());
        let data: serde_json::Value =
            serde_json::from_str(e.data().expect("data").get()).expect("json");
        assert_eq!(
            data,
            json!({"field": "ntx", "input": "\"0x10\"", "rule": "not_decimal"})
        );
    }

    #[test]
    fn ntx_text_shows_decimals_not_base_units() {
        assert_eq!(super::ntx_text(0), "0 NTX");
        assert_eq!(super::ntx_text(555), "0.000555 NTX");
        assert_eq!(super::ntx_text(1_500_000), "1.5 NTX");
        assert_eq!(super::ntx_text(100_000_000), "100 NTX");
        assert_eq!(super::ntx_text(999_900_089_997), "999900.089997 NTX");
        assert_eq!(super::ntx_text(u64::MAX), "18446744073709.551615 NTX");
    }
}
