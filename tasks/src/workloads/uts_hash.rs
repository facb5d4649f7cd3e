//! The SHA-1 of a UTS child, specialized for the GPU: one 64-byte block whose message is the
//! parent's 20 state bytes and the child index as 4 big-endian bytes (24 bytes, so the padding
//! and the length are constants), with the 80 rounds written out so that every message word sits
//! at a constant index.
//!
//! Why not the `sha1` crate on the GPU: its streaming hasher keeps a block buffer indexed at run
//! time, and `sha1::compress` takes blocks as byte slices; on `nvptx64` both end in local memory
//! (the UTS worker entry got a large stack frame, docs/results.md). Here nothing is indexed at
//! run time, so the whole state stays in registers. The host keeps the crate (SHA-NI on x86), and
//! the tests below check this function against it on random parents and indices.

/// SHA-1's initial hash value (FIPS 180-4, 5.3.1).
const H0: [u32; 5] = [
    0x6745_2301,
    0xEFCD_AB89,
    0x98BA_DCFE,
    0x1032_5476,
    0xC3D2_E1F0,
];

/// The message length in bits: 20 state bytes and a 4-byte index.
const MESSAGE_BITS: u32 = 24 * 8;

/// The SHA-1 digest of `parent || index.to_be_bytes()`.
#[inline(always)]
pub fn child_digest(parent: &[u8; 20], index: u32) -> [u8; 20] {
    // Four bytes at once (a word's access, not four bytes'), so that the node's state stays in
    // 32-bit registers (see `uts::state_word`).
    let word = |k: usize| u32::from_be_bytes(super::uts::state_word(parent, k));
    // The one padded block: the message, the 0x80 terminator, zeros, and the length.
    let mut w = [
        word(0),
        word(1),
        word(2),
        word(3),
        word(4),
        index,
        0x8000_0000,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        MESSAGE_BITS,
    ];
    let mut s = H0;
    rounds(&mut s, &mut w);
    let mut out = [0u8; 20];
    for (k, h) in H0.iter().enumerate() {
        out[4 * k..4 * k + 4].copy_from_slice(&s[k].wrapping_add(*h).to_be_bytes());
    }
    out
}

/// Round `T` of SHA-1 (FIPS 180-4, 6.1.2) on the working variables `s = [a, b, c, d, e]`, with
/// the message schedule kept in a 16-word window `w` (word `T` at `w[T % 16]`). `T` is a
/// constant, so every index is too.
#[inline(always)]
fn round<const T: usize>(s: &mut [u32; 5], w: &mut [u32; 16]) {
    if T >= 16 {
        w[T % 16] =
            (w[(T + 13) % 16] ^ w[(T + 8) % 16] ^ w[(T + 2) % 16] ^ w[T % 16]).rotate_left(1);
    }
    let [a, b, c, d, e] = *s;
    let (f, k) = match T / 20 {
        0 => ((b & c) | (!b & d), 0x5A82_7999),
        1 => (b ^ c ^ d, 0x6ED9_EBA1),
        2 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
        _ => (b ^ c ^ d, 0xCA62_C1D6),
    };
    let temp = a
        .rotate_left(5)
        .wrapping_add(f)
        .wrapping_add(e)
        .wrapping_add(k)
        .wrapping_add(w[T % 16]);
    *s = [temp, a, b.rotate_left(30), c, d];
}

/// Rounds `$t..` written out, one call per round number.
macro_rules! rounds {
    ($s:ident, $w:ident; $($t:literal)*) => {
        $(round::<$t>($s, $w);)*
    };
}

/// All 80 rounds.
#[inline(always)]
fn rounds(s: &mut [u32; 5], w: &mut [u32; 16]) {
    rounds!(s, w;
        0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19
        20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39
        40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59
        60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79);
}

#[cfg(test)]
mod tests {
    use super::child_digest;
    use crate::workloads::uts::UtsNode;
    use proptest::prelude::*;

    /// The host's child hash: `UtsNode::child` through the `sha1` crate.
    fn reference(parent: &[u8; 20], index: u32) -> [u8; 20] {
        UtsNode {
            state: *parent,
            depth: 0,
        }
        .child(index)
        .state
    }

    #[test]
    fn matches_the_sha1_crate_on_fixed_inputs() {
        for (parent, index) in [([0u8; 20], 0), ([0xff; 20], u32::MAX), ([7; 20], 99)] {
            assert_eq!(child_digest(&parent, index), reference(&parent, index));
        }
    }

    #[test]
    fn a_changed_bit_changes_the_digest() {
        // The twin of the comparison: the function is not a constant or an identity.
        let parent = [3u8; 20];
        assert_ne!(child_digest(&parent, 1), child_digest(&parent, 2));
        let mut other = parent;
        other[19] ^= 1;
        assert_ne!(child_digest(&parent, 1), child_digest(&other, 1));
    }

    proptest! {
        #[test]
        fn matches_the_sha1_crate(parent in any::<[u8; 20]>(), index in any::<u32>()) {
            prop_assert_eq!(child_digest(&parent, index), reference(&parent, index));
        }
    }
}
