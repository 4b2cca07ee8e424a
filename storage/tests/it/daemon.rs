//! The js-ipfs daemon of the `kubo` pinner tests ([`ganglion_storage::test_utils::js_ipfs`]).

pub(crate) use ganglion_storage::test_utils::js_ipfs::{start, unavailable};
