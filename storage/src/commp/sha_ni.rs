//! Several piece-tree parent hashes at once with the x86 SHA extensions: SHA-256 of `N`
//! independent 64-byte messages, instructions interleaved so the dependency chains overlap (a
//! single SHA-256 stream is latency-bound on `sha256rnds2`). The second block of a 64-byte message is
//! the constant padding block, whose message schedule (plus round constants) is precomputed.
//!
//! Structure follows the `sha2` crate's x86 backend (Intel's SHA extensions reference).

use core::arch::x86_64::*;

use super::Node;

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// `W[t] + K[t]` of the padding block of a 64-byte message (0x80, zeros, length 512 bits).
const PAD_WK: [u32; 64] = {
    let mut w = [0u32; 64];
    w[0] = 0x8000_0000;
    w[15] = 512;
    let mut t = 16;
    while t < 64 {
        let s0 = w[t - 15].rotate_right(7) ^ w[t - 15].rotate_right(18) ^ (w[t - 15] >> 3);
        let s1 = w[t - 2].rotate_right(17) ^ w[t - 2].rotate_right(19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16]
            .wrapping_add(s0)
            .wrapping_add(w[t - 7])
            .wrapping_add(s1);
        t += 1;
    }
    let mut wk = [0u32; 64];
    let mut i = 0;
    while i < 64 {
        wk[i] = w[i].wrapping_add(K[i]);
        i += 1;
    }
    wk
};

/// Whether this CPU has the instructions [`hash_pairs`] needs.
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("sha")
        && std::arch::is_x86_feature_detected!("sse4.1")
        && std::arch::is_x86_feature_detected!("ssse3")
}

/// Parents of `N` node pairs: `H(p[0] ‖ p[1])` for each pair, truncated to 254 bits. The `N`
/// hash chains are independent, so their rounds overlap in the pipeline.
///
/// # Safety
/// The CPU must support SHA, SSE2, SSSE3 and SSE4.1 ([`available`]).
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
pub(super) unsafe fn hash_pairs<const N: usize>(pairs: &[[Node; 2]; N]) -> [Node; N] {
    let mask = _mm_set_epi64x(0x0C0D_0E0F_0809_0A0B, 0x0405_0607_0001_0203);
    // IV in the (ABEF, CDGH) layout sha256rnds2 uses.
    let iv_abef = _mm_set_epi32(
        0x6a09e667u32 as i32,
        0xbb67ae85u32 as i32,
        0x510e527fu32 as i32,
        0x9b05688cu32 as i32,
    );
    let iv_cdgh = _mm_set_epi32(
        0x3c6ef372u32 as i32,
        0xa54ff53au32 as i32,
        0x1f83d9abu32 as i32,
        0x5be0cd19u32 as i32,
    );
    let mut w = [[_mm_setzero_si128(); 4]; N];
    for (lane, pair) in pairs.iter().enumerate() {
        for (j, node) in pair.iter().enumerate() {
            for half in 0..2 {
                // SAFETY: `node` is 32 bytes and `half` ∈ {0, 1} selects 16 of them; loadu has
                // no alignment requirement.
                let v = unsafe { _mm_loadu_si128(node.as_ptr().add(16 * half).cast()) };
                w[lane][2 * j + half] = _mm_shuffle_epi8(v, mask);
            }
        }
    }
    let mut abef = [iv_abef; N];
    let mut cdgh = [iv_cdgh; N];

    // Block 1: the 64 bytes of data. Four rounds per step; message words rotate through `w`.
    for step in 0..16 {
        let k = _mm_set_epi32(
            K[4 * step + 3] as i32,
            K[4 * step + 2] as i32,
            K[4 * step + 1] as i32,
            K[4 * step] as i32,
        );
        for lane in 0..N {
            let ws = &mut w[lane];
            let cur = if step < 4 {
                ws[step]
            } else {
                let t1 = _mm_sha256msg1_epu32(ws[0], ws[1]);
                let t2 = _mm_alignr_epi8(ws[3], ws[2], 4);
                let next = _mm_sha256msg2_epu32(_mm_add_epi32(t1, t2), ws[3]);
                *ws = [ws[1], ws[2], ws[3], next];
                next
            };
            let t = _mm_add_epi32(cur, k);
            cdgh[lane] = _mm_sha256rnds2_epu32(cdgh[lane], abef[lane], t);
            abef[lane] = _mm_sha256rnds2_epu32(abef[lane], cdgh[lane], _mm_shuffle_epi32(t, 0x0E));
        }
    }
    for lane in 0..N {
        abef[lane] = _mm_add_epi32(abef[lane], iv_abef);
        cdgh[lane] = _mm_add_epi32(cdgh[lane], iv_cdgh);
    }

    // Block 2: the constant padding block, schedule precomputed.
    let (save_abef, save_cdgh) = (abef, cdgh);
    for step in 0..16 {
        let wk = _mm_set_epi32(
            PAD_WK[4 * step + 3] as i32,
            PAD_WK[4 * step + 2] as i32,
            PAD_WK[4 * step + 1] as i32,
            PAD_WK[4 * step] as i32,
        );
        let hi = _mm_shuffle_epi32(wk, 0x0E);
        for lane in 0..N {
            cdgh[lane] = _mm_sha256rnds2_epu32(cdgh[lane], abef[lane], wk);
            abef[lane] = _mm_sha256rnds2_epu32(abef[lane], cdgh[lane], hi);
        }
    }

    let mut out = [[0u8; 32]; N];
    for lane in 0..N {
        let abef = _mm_add_epi32(abef[lane], save_abef[lane]);
        let cdgh = _mm_add_epi32(cdgh[lane], save_cdgh[lane]);
        // (ABEF, CDGH) → words a..d and e..h, then big-endian bytes.
        let feba = _mm_shuffle_epi32(abef, 0x1B);
        let dchg = _mm_shuffle_epi32(cdgh, 0xB1);
        let dcba = _mm_blend_epi16(feba, dchg, 0xF0);
        let hgef = _mm_alignr_epi8(dchg, feba, 8);
        let node = &mut out[lane];
        // SAFETY: `node` is 32 bytes; storeu has no alignment requirement.
        unsafe {
            _mm_storeu_si128(node.as_mut_ptr().cast(), _mm_shuffle_epi8(dcba, mask));
            _mm_storeu_si128(
                node.as_mut_ptr().add(16).cast(),
                _mm_shuffle_epi8(hgef, mask),
            );
        }
        node[31] &= 0x3f;
    }
    out
}
