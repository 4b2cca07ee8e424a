//! N2N: chainsync delivering headers, blockfetch for each block, through
//! [`ganglion_cardano::client::N2nClient`].

use ganglion_cardano::client::N2nClient;
use pallas_network::miniprotocols::Point as WirePoint;
use pallas_network::miniprotocols::chainsync::N2NClient;
use pallas_traverse::MultiEraHeader;

use super::{ChainEvent, FollowError, Roll, next_roll};

/// A node-to-node follower.
pub struct N2nFollower {
    client: N2nClient,
}

impl N2nFollower {
    /// Connects to a relay (`host:port`) and performs the N2N handshake (v7 and above).
    ///
    /// # Errors
    /// [`FollowError::Connect`].
    pub async fn connect(addr: &str, magic: u64) -> Result<Self, FollowError> {
        let client =
            N2nClient::connect(addr, magic)
                .await
                .map_err(|source| FollowError::Connect {
                    source_desc: addr.to_string(),
                    source,
                })?;
        Ok(Self { client })
    }

    pub(crate) fn chainsync(&mut self) -> &mut N2NClient {
        self.client.chainsync()
    }

    pub(crate) async fn next(&mut self) -> Result<ChainEvent, FollowError> {
        let (header, tip) = match next_roll(self.client.chainsync()).await? {
            Roll::Forward(header, tip) => (header, tip),
            Roll::Backward(point) => return Ok(ChainEvent::RollBackward(point)),
        };
        let subtag = header.byron_prefix.map(|(s, _)| s);
        let h = MultiEraHeader::decode(header.variant, subtag, &header.cbor)
            .map_err(FollowError::Header)?;
        let point = WirePoint::Specific(h.slot(), h.hash().to_vec());
        let body = self
            .client
            .blockfetch()
            .fetch_single(point)
            .await
            .map_err(FollowError::Blockfetch)?;
        Ok(ChainEvent::RollForward {
            block: body,
            more: h.number() < tip,
        })
    }
}
