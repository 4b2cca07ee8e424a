//! One transaction builder per v2 action. Each returns a [`Draft`]
//! with the inputs, reference inputs, outputs (in the positions the validator expects), mints,
//! signers and validity interval of the action; [`crate::tx::balance`] then funds, evaluates
//! and prices it. Builders check what they can off-chain and name the problem; the validator
//! checks everything again on-chain.

mod bond;
mod claim;
mod escrow;
mod expire;
mod rescale;

pub use crate::tx::{deploy, reference_script_output};
pub use crate::v2::datum::{job_id_of, job_tag};
pub use bond::{BondRequest, post_bond, top_up, unbond, withdraw};
pub use claim::{ClaimRequest, claim};
pub use escrow::{AssignRequest, LockRequest, assign, cancel, lock};
pub use expire::{ExpireOutcome, ExpireRequest, expire};
pub use rescale::{RescaleRequest, rescale};

use crate::blueprint::Script;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::tx::{Output, Utxo, Value};
use crate::tx::{funded, payee};
use crate::v2::datum::{BondDatum, EscrowDatum, GanglionDatum};
use crate::v2::params::Params;

/// A deployed `ganglion_v2` validator: its parameters, the applied script and the UTxO
/// carrying it as a reference script.
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
    /// The script address (escrows, bonds, burnt slashes) on the env's network.
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

fn at_script(dep: &Deployment, env: &Env, utxo: &Utxo) -> Result<()> {
    if utxo.output.address != dep.address(env) {
        return Err(Error::InvalidRequest(format!(
            "{} is not at this deployment's script address",
            utxo.reference
        )));
    }
    Ok(())
}

/// The escrow datum of `utxo`, checked to sit at the script and hold its thread token.
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
        GanglionDatum::Bond(_) | GanglionDatum::Burnt(_) => Err(Error::InvalidRequest(format!(
            "{} is not an escrow",
            utxo.reference
        ))),
    }
}

/// The bond datum of `utxo`, checked to sit at the script and hold its bond token.
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
        GanglionDatum::Escrow(_) | GanglionDatum::Burnt(_) => Err(Error::InvalidRequest(format!(
            "{} is not a bond",
            utxo.reference
        ))),
    }
}

/// The refund of an escrow: `ntx` NTX and all of the escrow's lovelace to the orchestrator's
/// key address, tagged with the job id.
pub(crate) fn refund(
    dep: &Deployment,
    env: &Env,
    e: &EscrowDatum,
    escrow: &Utxo,
    ntx: u64,
) -> Result<Output> {
    funded(
        env,
        payee(env, &e.orchestrator),
        Value::lovelace(escrow.output.value.lovelace).with_class(&dep.params.ntx, ntx),
        Some(job_tag(&e.job_id)),
    )
}
