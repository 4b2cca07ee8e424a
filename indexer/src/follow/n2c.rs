//! N2C: chainsync delivering whole blocks, over a Unix socket or TCP.

use std::path::Path;

use pallas_network::facades::NodeClient;
use pallas_network::miniprotocols::chainsync::N2CClient;
use pallas_network::miniprotocols::handshake;
use pallas_network::multiplexer::Bearer;

use super::{ChainEvent, FollowError, Roll, next_roll};

/// A node-to-client chainsync follower.
pub struct N2cFollower {
    client: NodeClient,
}

fn connect_error(source_desc: String) -> impl Fn(String) -> FollowError {
    move |reason| FollowError::Connect {
        source_desc: source_desc.clone(),
        reason,
    }
}

impl N2cFollower {
    /// Connects to a node socket.
    ///
    /// # Errors
    /// [`FollowError::Connect`].
    pub async fn connect_unix(socket: &Path, magic: u64) -> Result<Self, FollowError> {
        let client = NodeClient::connect(socket, magic)
            .await
            .map_err(|e| connect_error(socket.display().to_string())(e.to_string()))?;
        Ok(Self { client })
    }

    /// Connects to an N2C endpoint over TCP and performs the handshake (v10 and above).
    ///
    /// # Errors
    /// [`FollowError::Connect`].
    pub async fn connect_tcp(addr: &str, magic: u64) -> Result<Self, FollowError> {
        let err = connect_error(addr.to_string());
        let bearer = Bearer::connect_tcp(addr)
            .await
            .map_err(|e| err(e.to_string()))?;
        let mut client = NodeClient::new(bearer);
        let versions = handshake::n2c::VersionTable::v10_and_above(magic);
        match client.handshake().handshake(versions).await {
            Ok(handshake::Confirmation::Accepted(..)) => Ok(Self { client }),
            Ok(other) => Err(err(format!("handshake refused: {other:?}"))),
            Err(e) => Err(err(e.to_string())),
        }
    }

    pub(crate) fn chainsync(&mut self) -> &mut N2CClient {
        self.client.chainsync()
    }

    pub(crate) async fn next(&mut self) -> Result<ChainEvent, FollowError> {
        Ok(match next_roll(self.client.chainsync()).await? {
            Roll::Forward(block) => ChainEvent::RollForward(block.0),
            Roll::Backward(point) => ChainEvent::RollBackward(point),
        })
    }
}
