//! N2N over TCP: handshake, chainsync (headers), blockfetch and keepalive, served with
//! pallas `PeerServer` (the keepalive side runs as its own loop).

use std::sync::Arc;

use pallas_network::facades::{KeepAliveLoop, PeerServer};
use pallas_network::miniprotocols::chainsync::HeaderContent;
use pallas_network::miniprotocols::handshake::n2n;
use pallas_network::multiplexer::Bearer;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::chain::Chain;
use crate::producer::CONWAY_HEADER_VARIANT;
use crate::serve::{HANDSHAKE_TIMEOUT, ServeError, blockfetch, chainsync};
use crate::store::StoredBlock;

fn header_content(b: &StoredBlock) -> HeaderContent {
    HeaderContent {
        variant: CONWAY_HEADER_VARIANT,
        byron_prefix: None,
        cbor: b.header.clone(),
    }
}

/// Accept N2N connections on `listener` until `cancel`; connections are drained on exit.
pub async fn run(listener: TcpListener, chain: Arc<Chain>, magic: u64, cancel: CancellationToken) {
    let tracker = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            r = Bearer::accept_tcp(&listener) => r,
            _ = cancel.cancelled() => break,
        };
        match accepted {
            Ok((bearer, peer)) => {
                let chain = chain.clone();
                let cancel = cancel.child_token();
                tracker.spawn(async move {
                    if let Err(e) = connection(bearer, chain, magic, cancel).await {
                        tracing::debug!(%peer, error = %e, "n2n connection closed");
                    }
                });
            }
            Err(e) => tracing::warn!(error = %e, "n2n accept failed"),
        }
    }
    tracker.close();
    tracker.wait().await;
}

async fn connection(
    bearer: Bearer,
    chain: Arc<Chain>,
    magic: u64,
    cancel: CancellationToken,
) -> Result<(), ServeError> {
    let mut server = PeerServer::new(bearer);
    let hs = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        server
            .handshake()
            .handshake(n2n::VersionTable::v7_and_above(magic)),
    )
    .await;
    match hs {
        Ok(Ok(Some(_))) => {}
        Ok(Ok(None)) => {
            server.abort().await;
            return Err(ServeError::NoCommonVersion);
        }
        Ok(Err(e)) => {
            server.abort().await;
            return Err(ServeError::Handshake(e));
        }
        Err(_) => {
            server.abort().await;
            return Err(ServeError::HandshakeTimeout);
        }
    }
    let PeerServer {
        plexer,
        mut chainsync,
        mut blockfetch,
        keepalive,
        ..
    } = server;
    let conn = cancel.child_token();
    let keepalive = KeepAliveLoop::server(keepalive).spawn();
    let cs = {
        let conn = conn.clone();
        let chain = chain.clone();
        async move {
            let r = chainsync::serve(&mut chainsync, chain, header_content, conn.clone()).await;
            if r.is_err() {
                conn.cancel();
            }
            r
        }
    };
    let bf = {
        let conn = conn.clone();
        async move {
            let r = blockfetch::serve(&mut blockfetch, chain, conn.clone()).await;
            if r.is_err() {
                conn.cancel();
            }
            r
        }
    };
    let result = tokio::select! {
        (a, b) = async { tokio::join!(cs, bf) } => a.and(b),
        _ = conn.cancelled() => Ok(()),
    };
    keepalive.abort();
    plexer.abort().await;
    result
}
