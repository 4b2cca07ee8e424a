//! N2N: chainsync delivering headers, blockfetch for each block.

use pallas_network::facades::PeerClient;
use pallas_network::miniprotocols::Point as WirePoint;
use pallas_network::miniprotocols::chainsync::{N2NClient, NextResponse};
use pallas_traverse::MultiEraHeader;

use super::{ChainEvent, FollowError, from_wire};

/// A node-to-node follower.
pub struct N2nFollower {
    client: PeerClient,
}

impl N2nFollower {
    /// Connects to a relay and performs the N2N handshake.
    ///
    /// # Errors
    /// [`FollowError::Connect`].
    pub async fn connect(addr: &str, magic: u64) -> Result<Self, FollowError> {
        let client = PeerClient::connect(addr, magic)
            .await
            .map_err(|e| FollowError::Connect {
                source_desc: addr.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Self { client })
    }

    pub(crate) fn chainsync(&mut self) -> &mut N2NClient {
        self.client.chainsync()
    }

    pub(crate) async fn next(&mut self) -> Result<ChainEvent, FollowError> {
        loop {
            let r = self
                .client
                .chainsync()
                .request_or_await_next()
                .await
                .map_err(|e| FollowError::Protocol {
                    protocol: "chainsync",
                    reason: e.to_string(),
                })?;
            match r {
                NextResponse::RollForward(header, _) => {
                    let subtag = header.byron_prefix.map(|(s, _)| s);
                    let h = MultiEraHeader::decode(header.variant, subtag, &header.cbor)
                        .map_err(|e| FollowError::Header(e.to_string()))?;
                    let point = WirePoint::Specific(h.slot(), h.hash().to_vec());
                    let body = self
                        .client
                        .blockfetch()
                        .fetch_single(point)
                        .await
                        .map_err(|e| FollowError::Protocol {
                            protocol: "blockfetch",
                            reason: e.to_string(),
                        })?;
                    return Ok(ChainEvent::RollForward(body));
                }
                NextResponse::RollBackward(point, _) => {
                    return Ok(ChainEvent::RollBackward(from_wire(&point)));
                }
                NextResponse::Await => continue,
            }
        }
    }
}
