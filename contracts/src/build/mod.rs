//! One transaction builder per action. Each returns a [`Draft`] with exactly the inputs,
//! reference inputs, outputs (in the positions the validator expects), mints, signers and
//! validity interval of the action; [`crate::tx::balance`] then funds, evaluates and prices
//! it. Builders check what they can off-chain (datum shape, state, amounts) and name the
//! problem; the validator checks everything again on-chain.

mod bond;
mod escrow;

pub use crate::v2::datum::job_id_of;
pub use bond::{BondRequest, post_bond, unbond, withdraw};
pub use escrow::{
    AssignRequest, ExpireRequest, LockRequest, SettleRequest, assign, cancel, expire, lock,
    pay_for, settle,
};

use crate::blueprint::Script;
use crate::datum::{BondDatum, EscrowDatum, GanglionDatum};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::params::Params;
use crate::tx::Utxo;
pub use crate::tx::{deploy, reference_script_output};
pub(crate) use crate::tx::{funded, payee};
pub use crate::v2::datum::job_tag;

/// A deployed Ganglion validator: its parameters, the applied script and the UTxO carrying
/// it as a reference script.
#[derive(Debug, Clone)]
pub struct Deployment {
    /// Parameters applied.
    pub params: Params,
    /// The applied script (address, policy id).
    pub script: Script,
    /// The UTxO holding `script` as a reference script.
    pub reference: Utxo,
}

impl Deployment {
    /// The script address (escrows and bonds) on the env's network.
    pub fn address(&self, env: &Env) -> Vec<u8> {
        self.script.address(env.network)
    }
}

fn datum_of(utxo: &Utxo) -> Result<GanglionDatum> {
    let d = utxo.output.datum.as_ref().ok_or_else(|| {
        Error::InvalidRequest(format!("{} carries no inline datum", utxo.reference))
    })?;
    GanglionDatum::from_plutus_data(d)
}

pub(crate) fn escrow_datum(dep: &Deployment, env: &Env, utxo: &Utxo) -> Result<EscrowDatum> {
    at_script(dep, env, utxo)?;
    match datum_of(utxo)? {
        GanglionDatum::Escrow(e) => {
            if utxo.output.value.quantity(&dep.script.hash, &e.job_id.0) != 1 {
                return Err(Error::InvalidRequest(format!(
                    "{} does not hold the thread token of job {}",
                    utxo.reference, e.job_id
                )));
            }
            Ok(e)
        }
        GanglionDatum::Bond(_) => Err(Error::InvalidRequest(format!(
            "{} is a bond, not an escrow",
            utxo.reference
        ))),
    }
}

pub(crate) fn bond_datum(dep: &Deployment, env: &Env, utxo: &Utxo) -> Result<BondDatum> {
    at_script(dep, env, utxo)?;
    match datum_of(utxo)? {
        GanglionDatum::Bond(b) => {
            if utxo.output.value.quantity(&dep.script.hash, &b.provider) != 1 {
                return Err(Error::InvalidRequest(format!(
                    "{} does not hold its bond token",
                    utxo.reference
                )));
            }
            Ok(b)
        }
        GanglionDatum::Escrow(_) => Err(Error::InvalidRequest(format!(
            "{} is an escrow, not a bond",
            utxo.reference
        ))),
    }
}

fn at_script(dep: &Deployment, env: &Env, utxo: &Utxo) -> Result<()> {
    if utxo.output.address != dep.address(env) {
        return Err(Error::InvalidRequest(format!(
            "{} is not at this deployment's script address",
            utxo.reference
        )));
    }
    Ok(())
}
