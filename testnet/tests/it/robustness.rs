//! Garbage on a socket closes only that connection; a restart keeps the chain and UTxO set.

use ganglion_cardano::client::N2cClient;
use pallas_network::facades::PeerClient;
use pallas_network::miniprotocols::Point;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;

/// Send a handshake-protocol segment whose payload is not CBOR (`0xff` = a stray break)
/// and expect the server to close the connection promptly.
async fn garbage_segment_is_closed(mut s: impl AsyncReadExt + AsyncWriteExt + Unpin) {
    let payload = [0xffu8; 16];
    let mut segment = vec![0, 0, 0, 1, 0, 0];
    segment.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    segment.extend_from_slice(&payload);
    s.write_all(&segment).await.expect("write garbage");
    expect_closed(s).await;
}

/// Send random bytes then end the stream; the server must drop the connection.
async fn garbage_then_eof_is_closed(mut s: impl AsyncReadExt + AsyncWriteExt + Unpin) {
    s.write_all(b"\x13\x37 definitely not an ouroboros segment")
        .await
        .expect("write");
    s.shutdown().await.expect("shutdown");
    expect_closed(s).await;
}

async fn expect_closed(mut s: impl AsyncReadExt + Unpin) {
    let mut buf = [0u8; 256];
    let closed = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "server closed the garbage connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_closes_only_that_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    // A healthy follower connected before the garbage.
    let mut peer = PeerClient::connect(h.n2n_addr(), h.magic())
        .await
        .expect("n2n");

    let n2n = || tokio::net::TcpStream::connect(h.n2n_addr());
    let n2c_tcp = || tokio::net::TcpStream::connect(h.n2c_tcp_addr().expect("n2c tcp"));
    let unix = || tokio::net::UnixStream::connect(h.n2c_socket().expect("socket"));
    garbage_segment_is_closed(n2n().await.expect("tcp")).await;
    garbage_segment_is_closed(unix().await.expect("unix")).await;
    garbage_segment_is_closed(n2c_tcp().await.expect("tcp")).await;
    garbage_then_eof_is_closed(n2n().await.expect("tcp")).await;
    garbage_then_eof_is_closed(unix().await.expect("unix")).await;

    // The healthy connection and new ones still work.
    let (found, _) = peer
        .chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("intersect");
    assert_eq!(found, Some(Point::Origin));
    let mut c = N2cClient::connect_tcp(h.n2c_tcp_addr().expect("tcp"), h.magic())
        .await
        .expect("n2c over tcp");
    let (tx, _) = payment(&h, 0, 1, 3_000_000);
    c.submit(&tx).await.expect("still accepting");
    let (found, _) = c
        .chainsync()
        .find_intersect(vec![Point::Origin])
        .await
        .expect("n2c chainsync over tcp");
    assert_eq!(found, Some(Point::Origin));
    // A wrong magic is refused at the handshake.
    assert!(
        PeerClient::connect(h.n2n_addr(), h.magic() + 1)
            .await
            .is_err()
    );
    c.close().await;
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_chain_and_the_utxo_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let g = genesis();
    let h = start(dir.path(), g.clone()).await;
    let mut events = h.events();
    let (tx, _) = payment(&h, 2, 3, 4_000_000);
    let id = h.submit(tx).await.expect("accepted");
    wait_included(&mut events, id).await;
    let tip = h.tip().expect("tip");
    let mut utxos = h.chain().store().utxos().expect("utxos");
    h.shutdown().await;

    let h = start(dir.path(), g.clone()).await;
    assert_eq!(h.tip(), Some(tip));
    let mut again = h.chain().store().utxos().expect("utxos");
    utxos.sort();
    again.sort();
    assert_eq!(utxos, again);
    // The chain continues from the stored tip.
    let mut events = h.events();
    let (tx, _) = payment(&h, 3, 0, 1_000_000);
    let id = h.submit(tx).await.expect("accepted after restart");
    assert_eq!(wait_included(&mut events, id).await, tip.number + 1);
    let block = h
        .chain()
        .store()
        .block(tip.number + 1)
        .expect("read")
        .expect("block");
    let b = pallas_traverse::MultiEraBlock::decode(&block.wrapped).expect("decodes");
    assert_eq!(b.header().previous_hash(), Some(tip.hash));
    h.shutdown().await;

    // Another genesis cannot reuse the directory.
    let mut other = g;
    other.network_magic += 1;
    assert!(
        ganglion_testnet::devnet::start(ganglion_testnet::devnet::DevnetConfig::new(
            other,
            dir.path()
        ))
        .await
        .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_n2n_server_answers_keepalive() {
    use pallas_network::miniprotocols::handshake::{self, n2n};
    use pallas_network::miniprotocols::{
        PROTOCOL_N2N_HANDSHAKE, PROTOCOL_N2N_KEEP_ALIVE, keepalive,
    };
    use pallas_network::multiplexer::{Bearer, Plexer};
    let dir = tempfile::tempdir().expect("tempdir");
    let h = start(dir.path(), genesis()).await;
    let bearer = Bearer::connect_tcp(h.n2n_addr()).await.expect("tcp");
    let mut plexer = Plexer::new(bearer);
    let mut hs: handshake::N2NClient =
        handshake::Client::new(plexer.subscribe_client(PROTOCOL_N2N_HANDSHAKE));
    let mut ka = keepalive::Client::new(plexer.subscribe_client(PROTOCOL_N2N_KEEP_ALIVE));
    let plexer = plexer.spawn();
    let confirmed = hs
        .handshake(n2n::VersionTable::v7_and_above(h.magic()))
        .await
        .expect("handshake");
    assert!(matches!(confirmed, handshake::Confirmation::Accepted(..)));
    for _ in 0..3 {
        tokio::time::timeout(TIMEOUT, ka.keepalive_roundtrip())
            .await
            .expect("in time")
            .expect("keepalive answered");
    }
    plexer.abort().await;
    h.shutdown().await;
}
