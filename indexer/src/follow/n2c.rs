//! N2C: chainsync delivering whole blocks, over a Unix socket or TCP, through
//! [`ganglion_cardano::client::N2cClient`].

use std::path::Path;

use ganglion_cardano::client::{ClientError, N2cClient};
use pallas_network::miniprotocols::chainsync::N2CClient;

use super::{ChainEvent, FollowError, Roll, next_roll};

/// A node-to-client chainsync follower.
pub struct N2cFollower {
    client: N2cClient,
}

fn connect_error(source_desc: impl ToString) -> impl FnOnce(ClientError) -> FollowError {
    move |source| FollowError::Connect {
        source_desc: source_desc.to_string(),
        source,
    }
}

impl N2cFollower {
    /// Connects to a node socket and performs the handshake (v10 and above).
    ///
    /// # Errors
    /// [`FollowError::Connect`].
    pub async fn connect_unix(socket: &Path, magic: u64) -> Result<Self, FollowError> {
        let client = N2cClient::connect_unix(socket, magic)
            .await
            .map_err(connect_error(socket.display()))?;
        Ok(Self { client })
    }

    /// Connects to an N2C endpoint over TCP (`host:port`) and performs the handshake (v10
    /// and above).
    ///
    /// # Errors
    /// [`FollowError::Connect`].
    pub async fn connect_tcp(addr: &str, magic: u64) -> Result<Self, FollowError> {
        let client = N2cClient::connect_tcp(addr, magic)
            .await
            .map_err(connect_error(addr))?;
        Ok(Self { client })
    }

    pub(crate) fn chainsync(&mut self) -> &mut N2CClient {
        self.client.chainsync()
    }

    pub(crate) async fn next(&mut self) -> Result<ChainEvent, FollowError> {
        Ok(match next_roll(self.client.chainsync()).await? {
            Roll::Forward(block, tip) => ChainEvent::RollForward {
                more: super::block_number(&block.0).is_some_and(|n| n < tip),
                block: block.0,
            },
            Roll::Backward(point) => ChainEvent::RollBackward(point),
        })
    }
}
