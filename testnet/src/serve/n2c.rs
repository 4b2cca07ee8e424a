//! N2C over a Unix socket (and TCP for convenience): handshake, chainsync with whole
//! blocks, local-tx-submission with readable rejections, minimal local-state-query.
//!
//! The facade is built by hand over the pallas multiplexer because the local-tx-submission
//! agent uses the devnet's own rejection type ([`ganglion_cardano::localtx::WireRejection`]).

use std::sync::Arc;

use pallas_network::miniprotocols::chainsync::{self, BlockContent};
use pallas_network::miniprotocols::handshake::{self, n2c};
use pallas_network::miniprotocols::{
    PROTOCOL_N2C_CHAIN_SYNC, PROTOCOL_N2C_HANDSHAKE, PROTOCOL_N2C_STATE_QUERY,
    PROTOCOL_N2C_TX_SUBMISSION, localstate,
};
use pallas_network::multiplexer::{Bearer, Plexer};
use tokio::net::{TcpListener, UnixListener};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::chain::Chain;
use crate::serve::{HANDSHAKE_TIMEOUT, ServeError, chainsync as cs, localstate as lsq, localtx};
use crate::store::StoredBlock;

fn block_content(b: &StoredBlock) -> BlockContent {
    BlockContent(b.wrapped.clone())
}

/// A listener for N2C connections.
pub enum Listener {
    /// A Unix-domain socket (the cardano-node convention).
    Unix(UnixListener),
    /// TCP.
    Tcp(TcpListener),
}

/// Settings shared by all N2C connections.
#[derive(Clone, Copy)]
pub struct N2cSettings {
    /// Network magic.
    pub magic: u64,
    /// Genesis system start (POSIX ms) for `GetSystemStart`.
    pub system_start_ms: u64,
}

/// Accept N2C connections until `cancel`; connections are drained on exit.
pub async fn run(
    listener: Listener,
    chain: Arc<Chain>,
    settings: N2cSettings,
    cancel: CancellationToken,
) {
    let tracker = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            r = async {
                match &listener {
                    Listener::Unix(l) => Bearer::accept_unix(l).await.map(|(b, _)| b),
                    Listener::Tcp(l) => Bearer::accept_tcp(l).await.map(|(b, _)| b),
                }
            } => r,
            _ = cancel.cancelled() => break,
        };
        match accepted {
            Ok(bearer) => {
                let chain = chain.clone();
                let cancel = cancel.child_token();
                tracker.spawn(async move {
                    if let Err(e) = connection(bearer, chain, settings, cancel).await {
                        tracing::debug!(error = %e, "n2c connection closed");
                    }
                });
            }
            Err(e) => tracing::warn!(error = %e, "n2c accept failed"),
        }
    }
    tracker.close();
    tracker.wait().await;
}

async fn connection(
    bearer: Bearer,
    chain: Arc<Chain>,
    settings: N2cSettings,
    cancel: CancellationToken,
) -> Result<(), ServeError> {
    let mut plexer = Plexer::new(bearer);
    let mut hs: handshake::N2CServer =
        handshake::Server::new(plexer.subscribe_server(PROTOCOL_N2C_HANDSHAKE));
    let mut chainsync = chainsync::N2CServer::new(plexer.subscribe_server(PROTOCOL_N2C_CHAIN_SYNC));
    let mut statequery = localstate::Server::new(plexer.subscribe_server(PROTOCOL_N2C_STATE_QUERY));
    let mut submission = localtx::Server::new(plexer.subscribe_server(PROTOCOL_N2C_TX_SUBMISSION));
    let plexer = plexer.spawn();

    let accepted = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        hs.handshake(n2c::VersionTable::v10_and_above(settings.magic)),
    )
    .await;
    let failure = match accepted {
        Ok(Ok(Some(_))) => None,
        Ok(Ok(None)) => Some(ServeError::NoCommonVersion),
        Ok(Err(e)) => Some(ServeError::Handshake(e)),
        Err(_) => Some(ServeError::HandshakeTimeout),
    };
    if let Some(f) = failure {
        plexer.abort().await;
        return Err(f);
    }

    let conn = cancel.child_token();
    let guard = |conn: CancellationToken| {
        move |r: Result<(), ServeError>| {
            if r.is_err() {
                conn.cancel();
            }
            r
        }
    };
    let a = {
        let (chain, conn) = (chain.clone(), conn.clone());
        async move {
            let r = cs::serve(&mut chainsync, chain, block_content, conn.clone()).await;
            guard(conn)(r)
        }
    };
    let b = {
        let (chain, conn) = (chain.clone(), conn.clone());
        async move {
            let r = localtx::serve(&mut submission, chain, conn.clone()).await;
            guard(conn)(r)
        }
    };
    let c = {
        let conn = conn.clone();
        async move {
            let r = lsq::serve(
                &mut statequery,
                chain,
                settings.system_start_ms,
                conn.clone(),
            )
            .await;
            guard(conn)(r)
        }
    };
    let result = tokio::select! {
        (a, b, c) = async { tokio::join!(a, b, c) } => a.and(b).and(c),
        _ = conn.cancelled() => Ok(()),
    };
    plexer.abort().await;
    result
}
