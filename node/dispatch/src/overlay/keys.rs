//! Ephemeral WireGuard keys: a fresh x25519 pair per job on each node, never written to disk
//! and dropped with the job (DESIGN §6). The public half travels in the `cluster` exchange.

use boringtun::x25519::{PublicKey, StaticSecret};

/// One node's key pair for one job.
#[derive(Clone)]
pub struct JobKeys {
    secret: StaticSecret,
    public: PublicKey,
}

impl JobKeys {
    /// A new random pair from the OS RNG.
    pub fn generate() -> Self {
        let secret = StaticSecret::random_from_rng(rand_core::OsRng);
        let public = PublicKey::from(&secret);
        Self { secret, public }
    }

    /// The public key (32 bytes) to announce to the job's peers.
    pub fn public(&self) -> PublicKey {
        self.public
    }

    /// The secret, for the noise state.
    pub(crate) fn secret(&self) -> &StaticSecret {
        &self.secret
    }
}

impl std::fmt::Debug for JobKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobKeys")
            .field("public", &hex::encode(self.public.as_bytes()))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fresh_and_consistent() {
        let a = JobKeys::generate();
        let b = JobKeys::generate();
        assert_ne!(a.public().as_bytes(), b.public().as_bytes());
        assert_eq!(
            PublicKey::from(a.secret()).as_bytes(),
            a.public().as_bytes()
        );
        assert!(!format!("{a:?}").contains(&hex::encode(a.secret().to_bytes())));
    }
}
