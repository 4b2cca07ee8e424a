//! Filecoin piece commitment (CommP) and piece CID of a byte stream, streaming.
//!
//! The algorithm is `shared/fixtures/filecoin/README.md` (go-fil-commp-hashhash, rust-fil-proofs
//! `generate_piece_commitment`): zero-pad the payload to a power-of-two padded size, expand each
//! 127 bytes to 128 by fr32 padding (four 254-bit little-endian field elements), then a binary
//! Merkle tree whose parent is SHA-256(left ‖ right) with the top two bits of the last byte
//! cleared ("sha2-256-trunc254-padded").
//!
//! Speed: a node hash is two SHA-256 compressions (data + constant padding block) per 64 bytes, so
//! CommP does ~4× the compressions of a plain SHA-256 over the payload. [`CommP`] therefore hashes
//! whole subtrees of [`SEGMENT_BYTES`] level by level, four sibling pairs at a time with the x86
//! SHA extensions where present (`sha_ni`: four hash chains overlap), and on several threads
//! (up to [`MAX_THREADS`]); it buffers at most `2 × threads × SEGMENT_BYTES` of input plus 1 MiB of
//! leaves per thread.

#[cfg(target_arch = "x86_64")]
mod sha_ni;

use cid::Cid;
use cid::multihash::Multihash;

/// Smallest payload with a piece commitment, in bytes (`MinPiecePayload` in go-fil-commp-hashhash:
/// 65 bytes, so that the 128-byte minimum piece is more than half full).
pub const MIN_PAYLOAD_BYTES: u64 = 65;
/// Multicodec `fil-commitment-unsealed` (piece CID v1 codec).
pub const FIL_COMMITMENT_UNSEALED: u64 = 0xf101;
/// Multihash `sha2-256-trunc254-padded` (piece CID v1 hash).
pub const SHA2_256_TRUNC254_PADDED: u64 = 0x1012;
/// Multihash `fr32-sha256-trunc254-padbintree` (FRC-0069 piece CID v2 hash).
pub const FR32_SHA256_TRUNC254_PADBINTREE: u64 = 0x1011;

/// Payload bytes of one parallel subtree: 2^13 blocks of 127 bytes (a level-15 subtree).
pub const SEGMENT_BYTES: usize = 127 << SEGMENT_LOG2_BLOCKS;
const SEGMENT_LOG2_BLOCKS: u32 = 13;
/// Level of a segment's root (level 0 = 32-byte leaves; a 127-byte block is a level-2 node).
const SEGMENT_LEVEL: usize = 2 + SEGMENT_LOG2_BLOCKS as usize;
/// Most threads one hasher uses.
pub const MAX_THREADS: usize = 8;

/// A node of the piece tree: 32 bytes, top two bits of the last byte zero.
pub type Node = [u8; 32];

/// A payload too small for a piece commitment.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("payload of {payload_bytes} bytes is below Filecoin's {MIN_PAYLOAD_BYTES}-byte minimum")]
pub struct PayloadTooSmall {
    /// The payload size in bytes.
    pub payload_bytes: u64,
}

/// A piece commitment with its sizes. Deals carry `(piece_cid_v1, padded_bytes)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// CommP, the tree root.
    pub commp: Node,
    /// Padded piece size in bytes (a power of two ≥ 128): what a deal calls `PieceSize`.
    pub padded_bytes: u64,
    /// Payload size in bytes.
    pub payload_bytes: u64,
}

impl Piece {
    /// Unpadded piece size in bytes: `padded × 127 / 128` (what fits before fr32 padding).
    pub fn unpadded_bytes(&self) -> u64 {
        self.padded_bytes / 128 * 127
    }

    /// Tree height above the 32-byte leaves: `log2(padded / 32)`.
    pub fn height(&self) -> u8 {
        (self.padded_bytes / 32).trailing_zeros() as u8
    }

    /// Piece CID v1 (`baga6ea4seaq…`): CIDv1(fil-commitment-unsealed, sha2-256-trunc254-padded).
    pub fn cid_v1(&self) -> Cid {
        let mh = Multihash::<64>::wrap(SHA2_256_TRUNC254_PADDED, &self.commp)
            .expect("32-byte digest fits a 64-byte multihash");
        Cid::new_v1(FIL_COMMITMENT_UNSEALED, mh)
    }

    /// Piece CID v2 (FRC-0069, `bafkzcib…`): CIDv1(raw, fr32-sha256-trunc254-padbintree) with
    /// digest `uvarint(padding) ‖ height ‖ root`, padding = unpadded size − payload size.
    pub fn cid_v2(&self) -> Cid {
        let mut digest = Vec::with_capacity(10 + 1 + 32);
        let mut padding = self.unpadded_bytes() - self.payload_bytes;
        loop {
            let byte = (padding & 0x7f) as u8;
            padding >>= 7;
            if padding == 0 {
                digest.push(byte);
                break;
            }
            digest.push(byte | 0x80);
        }
        digest.push(self.height());
        digest.extend_from_slice(&self.commp);
        let mh = Multihash::<64>::wrap(FR32_SHA256_TRUNC254_PADBINTREE, &digest)
            .expect("at most 43-byte digest fits a 64-byte multihash");
        Cid::new_v1(crate::block::RAW, mh)
    }
}

/// Padded piece size in bytes for a payload of `payload_bytes`: the next power of two ≥
/// max(128, ⌈n / 127⌉ × 128).
pub fn padded_size(payload_bytes: u64) -> u64 {
    (payload_bytes.div_ceil(127) * 128)
        .max(128)
        .next_power_of_two()
}

/// Streaming CommP hasher. Feed bytes with [`CommP::update`] (or `std::io::Write`), then
/// [`CommP::finish`].
#[derive(Clone)]
pub struct CommP {
    partial: [u8; 127],
    partial_len: usize,
    payload_bytes: u64,
    /// 127-byte blocks absorbed into the tree.
    blocks: u64,
    threads: usize,
    /// Input waiting for a parallel batch (only with `threads > 1`).
    pending: Vec<u8>,
    /// `levels[i]` holds a pending left node at tree level `i + 2` (level 0 = 32-byte leaves; a
    /// 127-byte block yields four leaves, hashed straight to one level-2 node).
    levels: Vec<Option<Node>>,
}

impl Default for CommP {
    fn default() -> Self {
        Self::new()
    }
}

impl CommP {
    /// An empty hasher using up to [`MAX_THREADS`] of the machine's cores.
    pub fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self::with_threads(cores.min(MAX_THREADS))
    }

    /// An empty hasher using `threads` threads (1 = no threads spawned, no buffering).
    pub fn with_threads(threads: usize) -> Self {
        Self {
            partial: [0; 127],
            partial_len: 0,
            payload_bytes: 0,
            blocks: 0,
            threads: threads.clamp(1, MAX_THREADS),
            pending: Vec::new(),
            levels: Vec::new(),
        }
    }

    fn batch_bytes(&self) -> usize {
        SEGMENT_BYTES * self.threads * 2
    }

    /// Payload bytes fed so far.
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    /// Feeds payload bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.payload_bytes += data.len() as u64;
        if self.pending.is_empty() && data.len() >= self.batch_bytes() {
            let used = self.absorb_parallel(data);
            self.pending.extend_from_slice(&data[used..]);
            return;
        }
        self.pending.extend_from_slice(data);
        if self.pending.len() >= self.batch_bytes() {
            let pending = std::mem::take(&mut self.pending);
            let used = self.absorb_parallel(&pending);
            self.pending = pending[used..].to_vec();
        }
    }

    /// Absorbs whole 127-byte blocks of `data` (which must start block-aligned: `partial` empty),
    /// whole segments on threads; returns the bytes used.
    fn absorb_parallel(&mut self, data: &[u8]) -> usize {
        debug_assert_eq!(self.partial_len, 0);
        // Reach a segment boundary block by block, so segment roots land on empty levels.
        let per_segment = 1u64 << SEGMENT_LOG2_BLOCKS;
        let lead_blocks = ((per_segment - self.blocks % per_segment) % per_segment) as usize;
        let lead = (lead_blocks * 127).min(data.len() / 127 * 127);
        for block in data[..lead].chunks_exact(127) {
            self.push_block(block.try_into().expect("127-byte chunk"));
        }
        if lead < lead_blocks * 127 {
            return lead;
        }
        let rest = &data[lead..];
        let segments = rest.len() / SEGMENT_BYTES;
        let per_thread = segments.div_ceil(self.threads).max(1);
        let whole = &rest[..segments * SEGMENT_BYTES];
        let roots: Vec<Node> = if self.threads == 1 {
            whole
                .chunks_exact(SEGMENT_BYTES)
                .map(segment_root)
                .collect()
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = whole
                    .chunks(per_thread * SEGMENT_BYTES)
                    .map(|group| {
                        scope.spawn(move || {
                            group
                                .chunks_exact(SEGMENT_BYTES)
                                .map(segment_root)
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().expect("segment hashing does not panic"))
                    .collect()
            })
        };
        for root in roots {
            self.push_node(SEGMENT_LEVEL, root);
            self.blocks += per_segment;
        }
        lead + segments * SEGMENT_BYTES
    }

    /// Sequential absorb through the 127-byte buffer.
    fn absorb(&mut self, mut data: &[u8]) {
        if self.partial_len > 0 {
            let take = (127 - self.partial_len).min(data.len());
            self.partial[self.partial_len..self.partial_len + take].copy_from_slice(&data[..take]);
            self.partial_len += take;
            data = &data[take..];
            if self.partial_len < 127 {
                return;
            }
            let block = self.partial;
            self.push_block(&block);
            self.partial_len = 0;
        }
        let mut blocks = data.chunks_exact(127);
        for block in &mut blocks {
            // `chunks_exact` yields exactly 127 bytes.
            let block: &[u8; 127] = block.try_into().expect("127-byte chunk");
            self.push_block(block);
        }
        let rest = blocks.remainder();
        self.partial[..rest.len()].copy_from_slice(rest);
        self.partial_len = rest.len();
    }

    /// Zero-pads, completes the tree and returns the piece.
    ///
    /// # Errors
    /// [`PayloadTooSmall`] below 65 bytes.
    pub fn finish(mut self) -> Result<Piece, PayloadTooSmall> {
        let payload_bytes = self.payload_bytes;
        if payload_bytes < MIN_PAYLOAD_BYTES {
            return Err(PayloadTooSmall { payload_bytes });
        }
        let pending = std::mem::take(&mut self.pending);
        self.absorb(&pending);
        if self.partial_len > 0 {
            self.partial[self.partial_len..].fill(0);
            let block = self.partial;
            self.push_block(&block);
        }
        let padded_bytes = padded_size(payload_bytes);
        let height = (padded_bytes / 32).trailing_zeros() as usize;
        // Everything right of the data is zero: fold each pending left node with the zero subtree
        // of its level, bottom-up.
        let mut zero = zero_node(2);
        for level in 2..height {
            if let Some(left) = self.levels.get_mut(level - 2).and_then(Option::take) {
                self.push_node(level + 1, hash_pair(&left, &zero));
            }
            zero = hash_pair(&zero, &zero);
        }
        let commp = self
            .levels
            .get(height - 2)
            .copied()
            .flatten()
            .expect("a payload of ≥ 65 bytes fills the tree up to its root");
        Ok(Piece {
            commp,
            padded_bytes,
            payload_bytes,
        })
    }

    fn push_block(&mut self, block: &[u8; 127]) {
        self.blocks += 1;
        let leaves = fr32_expand(block);
        let a = hash_pair(&leaves[0], &leaves[1]);
        let b = hash_pair(&leaves[2], &leaves[3]);
        self.push_node(2, hash_pair(&a, &b));
    }

    fn push_node(&mut self, mut level: usize, mut node: Node) {
        loop {
            let slot = level - 2;
            if slot >= self.levels.len() {
                self.levels.resize(slot + 1, None);
            }
            match self.levels[slot].take() {
                Some(left) => {
                    node = hash_pair(&left, &node);
                    level += 1;
                }
                None => {
                    self.levels[slot] = Some(node);
                    return;
                }
            }
        }
    }
}

impl std::io::Write for CommP {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Root of the level-15 subtree over exactly [`SEGMENT_BYTES`] of payload, computed level by
/// level (1 MiB of leaves) so that sibling pairs can be hashed several at a time.
fn segment_root(segment: &[u8]) -> Node {
    let mut nodes: Vec<Node> = Vec::with_capacity(4 << SEGMENT_LOG2_BLOCKS);
    for block in segment.chunks_exact(127) {
        nodes.extend(fr32_expand(block.try_into().expect("127-byte chunk")));
    }
    while nodes.len() > 1 {
        reduce_level(&mut nodes);
    }
    nodes[0]
}

/// Parent hashes computed together by the SHA-extension path (independent chains in flight).
#[cfg(target_arch = "x86_64")]
const LANES: usize = 4;

/// Replaces a level of `2n` nodes by its `n` parents, in place (parent `i` overwrites node `i`,
/// which was already read since `i ≤ 2i`; a group of `LANES` reads nodes up to `2(i + LANES) - 1`
/// before writing `i..i + LANES`).
fn reduce_level(nodes: &mut Vec<Node>) {
    let half = nodes.len() / 2;
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if sha_ni::available() {
        while i + LANES <= half {
            let pairs: [[Node; 2]; LANES] =
                std::array::from_fn(|l| [nodes[2 * (i + l)], nodes[2 * (i + l) + 1]]);
            // SAFETY: `available()` checked that the CPU has the SHA extensions and SSE4.1.
            let parents = unsafe { sha_ni::hash_pairs(&pairs) };
            nodes[i..i + LANES].copy_from_slice(&parents);
            i += LANES;
        }
    }
    while i < half {
        nodes[i] = hash_pair(&nodes[2 * i], &nodes[2 * i + 1]);
        i += 1;
    }
    nodes.truncate(half);
}

/// CommP of `data` in one call.
///
/// # Errors
/// [`PayloadTooSmall`] below 65 bytes.
pub fn piece_of(data: &[u8]) -> Result<Piece, PayloadTooSmall> {
    let mut h = CommP::new();
    h.update(data);
    h.finish()
}

/// The commitment of an all-zero piece of `padded_bytes` (a power of two ≥ 32): the zero subtree
/// root of that height (go-commp-utils `zerocomm.PieceComms`).
pub fn zero_piece_commitment(padded_bytes: u64) -> Node {
    zero_node((padded_bytes / 32).trailing_zeros() as usize)
}

fn zero_node(level: usize) -> Node {
    let mut node = [0u8; 32];
    for _ in 0..level {
        node = hash_pair(&node, &node);
    }
    node
}

/// fr32 expansion of 127 bytes into four 32-byte leaves: the block read as a 1016-bit
/// little-endian integer, cut into 254-bit parts, each written little-endian in 32 bytes.
fn fr32_expand(input: &[u8; 127]) -> [Node; 4] {
    let mut out = [[0u8; 32]; 4];
    out[0].copy_from_slice(&input[..32]);
    out[0][31] &= 0x3f;
    for i in 0..32 {
        out[1][i] = (input[31 + i] >> 6) | (input[32 + i] << 2);
        out[2][i] = (input[63 + i] >> 4) | (input[64 + i] << 4);
        out[3][i] = (input[95 + i] >> 2) | input.get(96 + i).map_or(0, |b| b << 6);
    }
    out[1][31] &= 0x3f;
    out[2][31] &= 0x3f;
    out
}

const SHA256_IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// SHA-256 padding block for a 64-byte message: 0x80, zeros, bit length 512 big-endian.
const PAD_64: [u8; 64] = {
    let mut b = [0u8; 64];
    b[0] = 0x80;
    b[62] = 0x02;
    b
};

/// Parent node: SHA-256(left ‖ right) with the top two bits of byte 31 cleared. Calls the
/// compression function directly (two blocks: data, then the constant padding block).
fn hash_pair(left: &Node, right: &Node) -> Node {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(left);
    block[32..].copy_from_slice(right);
    let mut state = SHA256_IV;
    sha2::compress256(&mut state, &[block.into(), PAD_64.into()]);
    let mut out = [0u8; 32];
    for (chunk, word) in out.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out[31] &= 0x3f;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    #[test]
    fn hash_pair_is_truncated_sha256() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let mut want: Node = Sha256::new()
            .chain_update(a)
            .chain_update(b)
            .finalize()
            .into();
        want[31] &= 0x3f;
        assert_eq!(hash_pair(&a, &b), want);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sha_ni_lanes_equal_scalar() {
        if !sha_ni::available() {
            eprintln!("*** SKIPPED: CPU lacks SHA extensions");
            return;
        }
        let node = |seed: u8| -> Node {
            std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8 * 7))
        };
        for seed in 0..50u8 {
            let pairs: [[Node; 2]; 4] = std::array::from_fn(|l| {
                let s = seed.wrapping_add(l as u8 * 61);
                [node(s), node(s ^ 0x55)]
            });
            let want = pairs.map(|[a, b]| hash_pair(&a, &b));
            // SAFETY: checked above.
            assert_eq!(unsafe { sha_ni::hash_pairs(&pairs) }, want);
            let two = [pairs[0], pairs[1]];
            // SAFETY: checked above.
            assert_eq!(unsafe { sha_ni::hash_pairs(&two) }, [want[0], want[1]]);
        }
    }

    #[test]
    fn fr32_of_all_ones_clears_two_bits_per_leaf() {
        let leaves = fr32_expand(&[0xff; 127]);
        for leaf in leaves {
            assert_eq!(leaf[..31], [0xff; 31]);
            assert_eq!(leaf[31], 0x3f);
        }
    }

    #[test]
    fn padded_sizes() {
        assert_eq!(padded_size(65), 128);
        assert_eq!(padded_size(127), 128);
        assert_eq!(padded_size(128), 256);
        assert_eq!(padded_size(127 * 4), 512);
        assert_eq!(padded_size(127 * 4 + 1), 1024);
    }

    #[test]
    fn split_updates_equal_one_update() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 256) as u8).collect();
        let whole = piece_of(&data).expect("piece");
        let mut h = CommP::new();
        for part in data.chunks(13) {
            h.update(part);
        }
        assert_eq!(h.finish().expect("piece"), whole);
    }

    #[test]
    fn threads_do_not_change_the_result() {
        // 6.5 segments (more than one batch for 2 and 3 threads), fed whole and in odd slices so
        // batches start unaligned.
        let data: Vec<u8> = (0..SEGMENT_BYTES * 13 / 2 + 33)
            .map(|i| (i % 253) as u8)
            .collect();
        let one = {
            let mut h = CommP::with_threads(1);
            h.update(&data);
            h.finish().expect("piece")
        };
        for threads in [2, 3] {
            let mut h = CommP::with_threads(threads);
            for part in data.chunks(100_003) {
                h.update(part);
            }
            assert_eq!(h.finish().expect("piece"), one, "{threads} threads, sliced");
            let mut h = CommP::with_threads(threads);
            h.update(&data);
            assert_eq!(
                h.finish().expect("piece"),
                one,
                "{threads} threads, one slice"
            );
        }
    }

    #[test]
    fn below_minimum_is_refused() {
        assert_eq!(
            piece_of(&[0; 64]),
            Err(PayloadTooSmall { payload_bytes: 64 })
        );
    }
}
