//! Ephemeral WireGuard keys: a fresh x25519 pair per job on each node, dropped with the job
//! (DESIGN §6). The public half travels in the `cluster` exchange. While the job runs the node
//! keeps the secret in its data dir (mode 0600, `daemon::overlay`), so a node restarted
//! mid-set-up announces the same key its peers already learnt.

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

    /// The secret's 32 bytes, to keep the pair across a restart (write them as a secret file,
    /// mode 0600).
    pub fn to_secret_bytes(&self) -> [u8; 32] {
        self.secret.to_bytes()
    }

    /// The pair of the secret `bytes` ([`Self::to_secret_bytes`]).
    pub fn from_secret_bytes(bytes: [u8; 32]) -> Self {
        let secret = StaticSecret::from(bytes);
        let public = PublicKey::from(&secret);
        Self { secret, public }
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
        let back = JobKeys::from_secret_bytes(a.to_secret_bytes());
        assert_eq!(back.public().as_bytes(), a.public().as_bytes());
    }
}
