//! Transactions: UTxO types, a draft, its encoding as a Conway transaction, balancing to the
//! exact fee, and signing.
//!
//! Builders in [`crate::v2::build`] describe *what* an action spends, references, mints and
//! pays ([`Draft`]); [`balance`] adds wallet inputs, change and collateral, runs the scripts
//! through uplc to learn their ExUnits and iterates until fee and ExUnits are a fixed point.

mod assemble;
mod balance;
mod draft;
mod output;
mod value;

pub use assemble::{body_hash, encode_input, encode_output, sign};
pub use balance::{
    Balanced, MAX_COLLATERAL_WITHOUT_RETURN, Wallet, balance, output_min_lovelace as min_lovelace,
};
pub use draft::{Draft, Purpose};
pub use ganglion_cardano::txo::TxoRef;
pub use output::{deploy, reference_script_output};
pub(crate) use output::{funded, payee};
pub use value::{Output, Utxo, Value};
