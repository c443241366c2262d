//! The bytes of a string that [`super`]'s check looks at, found 64 at a
//! time: one bit per byte for quotes, backslashes, control bytes and
//! bytes that are not ASCII.
//!
//! A tool result is megabytes of text with an escape every few bytes, so
//! this is where a long line's time goes. The compares are as wide as the
//! CPU running the program has, chosen when it runs (the build targets
//! plain x86-64): SSE2 compares 16 bytes at a time and is on every x86-64;
//! AVX2 compares 32, and with it come the POPCNT and BMI1 instructions
//! that the bit work around the masks uses (without them, a count of bits
//! alone is a dozen instructions). AVX-512, a whole block a compare, was
//! no faster where it was measured. Elsewhere, a plain loop.

/// One bit per byte of a 64-byte block.
pub(super) struct Masks {
    pub quote: u64,
    pub backslash: u64,
    /// Bytes below 0x20.
    pub control: u64,
    /// Bytes that are not ASCII.
    pub high: u64,
}

/// One way of finding the [`Masks`] of a block. A value of a type with
/// wider compares exists only on a CPU that has them.
pub(super) trait Classify: Copy {
    fn masks(self, block: &[u8; 64]) -> Masks;

    /// The bytes that, after a backslash, make a one-character escape
    /// other than `\"` and `\\\\` (which [`Masks`] has): `/bfnrt`.
    fn escapable(self, block: &[u8; 64]) -> u64;
}

/// What every CPU of the target has.
#[derive(Clone, Copy)]
pub(super) struct Baseline;

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
impl Classify for Baseline {
    #[inline(always)]
    fn masks(self, block: &[u8; 64]) -> Masks {
        // SAFETY: this is compiled only where SSE2 is enabled, which every
        // x86-64 target does (it is part of the architecture's baseline).
        unsafe { sse2::masks(block) }
    }

    #[inline(always)]
    fn escapable(self, block: &[u8; 64]) -> u64 {
        // SAFETY: as in `masks`, SSE2 is enabled wherever this is compiled.
        unsafe { sse2::escapable(block) }
    }
}

/// Elsewhere, a plain loop.
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
impl Classify for Baseline {
    fn masks(self, block: &[u8; 64]) -> Masks {
        let (mut quote, mut backslash, mut control, mut high) = (0u64, 0u64, 0u64, 0u64);
        for (j, &c) in block.iter().enumerate() {
            quote |= u64::from(c == b'"') << j;
            backslash |= u64::from(c == b'\\') << j;
            control |= u64::from(c < 0x20) << j;
            high |= u64::from(c >= 0x80) << j;
        }
        Masks {
            quote,
            backslash,
            control,
            high,
        }
    }

    fn escapable(self, block: &[u8; 64]) -> u64 {
        let mut mask = 0u64;
        for (j, &c) in block.iter().enumerate() {
            mask |= u64::from(matches!(c, b'/' | b'b' | b'f' | b'n' | b'r' | b't')) << j;
        }
        mask
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };

    use super::Masks;

    /// The four 16-byte parts of a block.
    #[target_feature(enable = "sse2")]
    fn parts(block: &[u8; 64]) -> [__m128i; 4] {
        // SAFETY: each load reads 16 bytes at 0, 16, 32 or 48 of the 64 of
        // `block`; `loadu` needs no alignment.
        let p = block.as_ptr();
        unsafe {
            [
                _mm_loadu_si128(p.cast()),
                _mm_loadu_si128(p.add(16).cast()),
                _mm_loadu_si128(p.add(32).cast()),
                _mm_loadu_si128(p.add(48).cast()),
            ]
        }
    }

    #[target_feature(enable = "sse2")]
    fn bits(parts: [__m128i; 4], is: impl Fn(__m128i) -> __m128i) -> u64 {
        let [a, b, c, d] = parts.map(|v| u64::from(_mm_movemask_epi8(is(v)) as u16));
        a | b << 16 | c << 32 | d << 48
    }

    #[target_feature(enable = "sse2")]
    pub(super) fn masks(block: &[u8; 64]) -> Masks {
        let v = parts(block);
        Masks {
            quote: bits(v, |v| _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8))),
            backslash: bits(v, |v| _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8))),
            // A byte below 0x20: max(byte, 0x1f) is 0x1f.
            control: bits(v, |v| {
                _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f))
            }),
            high: bits(v, |v| v),
        }
    }

    #[target_feature(enable = "sse2")]
    pub(super) fn sixteen(part: &[u8; 16]) -> (u32, u32) {
        // SAFETY: the load reads the 16 bytes of `part`, unaligned.
        let v = unsafe { _mm_loadu_si128(part.as_ptr().cast()) };
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        let control = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
        // Not ASCII: the high bit, which `movemask` takes as it is.
        let stop = _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(backslash, control), v));
        (_mm_movemask_epi8(quote) as u32, stop as u32)
    }

    #[target_feature(enable = "sse2")]
    pub(super) fn escapable(block: &[u8; 64]) -> u64 {
        bits(parts(block), |v| {
            let is = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
            _mm_or_si128(
                _mm_or_si128(
                    _mm_or_si128(is(b'/'), is(b'b')),
                    _mm_or_si128(is(b'f'), is(b'n')),
                ),
                _mm_or_si128(is(b'r'), is(b't')),
            )
        })
    }
}

/// One bit per byte of 16 (the start of a string) for the quotes, and
/// one for the bytes that stop a quick look: backslashes, control bytes
/// and bytes that are not ASCII.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
pub(super) fn sixteen(part: &[u8; 16]) -> (u32, u32) {
    // SAFETY: SSE2 is enabled wherever this is compiled, as in `Baseline`.
    unsafe { sse2::sixteen(part) }
}

/// AVX2 (32 bytes a compare), with POPCNT and BMI1.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct Avx2(());

#[cfg(target_arch = "x86_64")]
impl Avx2 {
    /// Only on a CPU that has them (the answer is cached by `std`).
    pub(super) fn detect() -> Option<Self> {
        (is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("popcnt")
            && is_x86_feature_detected!("bmi1"))
        .then_some(Self(()))
    }
}

#[cfg(target_arch = "x86_64")]
impl Classify for Avx2 {
    #[inline(always)]
    fn masks(self, block: &[u8; 64]) -> Masks {
        // SAFETY: an `Avx2` is made only by `detect`, on a CPU with AVX2.
        unsafe { avx2::masks(block) }
    }

    #[inline(always)]
    fn escapable(self, block: &[u8; 64]) -> u64 {
        // SAFETY: as in `masks`.
        unsafe { avx2::escapable(block) }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_max_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8,
    };

    use super::Masks;

    #[target_feature(enable = "avx2")]
    fn halves(block: &[u8; 64]) -> [__m256i; 2] {
        // SAFETY: each load reads 32 bytes at 0 or 32 of the 64 of
        // `block`; `loadu` needs no alignment.
        let p = block.as_ptr();
        unsafe {
            [
                _mm256_loadu_si256(p.cast()),
                _mm256_loadu_si256(p.add(32).cast()),
            ]
        }
    }

    #[target_feature(enable = "avx2")]
    fn bits([lo, hi]: [__m256i; 2], is: impl Fn(__m256i) -> __m256i) -> u64 {
        u64::from(_mm256_movemask_epi8(is(lo)) as u32)
            | u64::from(_mm256_movemask_epi8(is(hi)) as u32) << 32
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn masks(block: &[u8; 64]) -> Masks {
        let v = halves(block);
        Masks {
            quote: bits(v, |v| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8))),
            backslash: bits(v, |v| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8))),
            // A byte below 0x20: max(byte, 0x1f) is 0x1f.
            control: bits(v, |v| {
                _mm256_cmpeq_epi8(
                    _mm256_max_epu8(v, _mm256_set1_epi8(0x1f)),
                    _mm256_set1_epi8(0x1f),
                )
            }),
            high: bits(v, |v| v),
        }
    }

    #[target_feature(enable = "avx2")]
    pub(super) fn escapable(block: &[u8; 64]) -> u64 {
        bits(halves(block), |v| {
            let is = |c: u8| _mm256_cmpeq_epi8(v, _mm256_set1_epi8(c as i8));
            _mm256_or_si256(
                _mm256_or_si256(
                    _mm256_or_si256(is(b'/'), is(b'b')),
                    _mm256_or_si256(is(b'f'), is(b'n')),
                ),
                _mm256_or_si256(is(b'r'), is(b't')),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// What each byte of `block` is, one byte at a time.
    fn expected(block: &[u8; 64]) -> [u64; 5] {
        let mut m = [0u64; 5];
        for (j, &c) in block.iter().enumerate() {
            let kinds = [
                c == b'"',
                c == b'\\',
                c < 0x20,
                c >= 0x80,
                matches!(c, b'/' | b'b' | b'f' | b'n' | b'r' | b't'),
            ];
            for (mask, is) in m.iter_mut().zip(kinds) {
                *mask |= u64::from(is) << j;
            }
        }
        m
    }

    fn found(classify: impl Classify, block: &[u8; 64]) -> [u64; 5] {
        let m = classify.masks(block);
        [
            m.quote,
            m.backslash,
            m.control,
            m.high,
            classify.escapable(block),
        ]
    }

    proptest! {
        /// Every way of classifying a block finds the same bytes, for the
        /// bytes at the edges of each class as for any other.
        #[test]
        fn every_width_classifies_byte_by_byte(
            bytes in prop::collection::vec(prop_oneof![
                prop::sample::select(vec![0x00u8, 0x1f, 0x20, b'"', b'\\', b'/', b'b', b'f', b'n', b'r', b't', b'u', 0x7f, 0x80, 0xff]),
                any::<u8>(),
            ], 64),
        ) {
            let block: [u8; 64] = bytes.try_into().expect("64 bytes");
            prop_assert_eq!(found(Baseline, &block), expected(&block));
            #[cfg(target_arch = "x86_64")]
            if let Some(avx2) = Avx2::detect() {
                prop_assert_eq!(found(avx2, &block), expected(&block));
            }
        }
    }
}
