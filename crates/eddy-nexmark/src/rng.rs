//! Small deterministic PRNG (splitmix64) used for every random draw.
//!
//! The reference generator draws from an unseeded `java.util.SplittableRandom`
//! shared by all events of a generator, so its output depends on the wall
//! clock and on how many draws earlier events made. This port instead seeds
//! a fresh splitmix64 stream for every (event id, field) pair: the value of a
//! field depends only on the event id, the field's stream constant and the
//! configuration, never on other events or on the parallelism.

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// Seed mixed into every event id before deriving field streams.
const EVENT_SEED: u64 = 0x4E45_584D_4152_4B21; // "NEXMARK!"

/// The splitmix64 finaliser (Stafford variant 13).
#[inline(always)]
pub(crate) const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A per-field stream constant, derived at compile time from a small tag.
pub(crate) const fn stream(tag: u64) -> u64 {
    mix64(tag.wrapping_mul(GOLDEN) ^ 0x05EE_D0FF_1E1D_u64)
}

/// Per-event base seed: a full-avalanche hash of the event id.
#[inline(always)]
pub(crate) fn event_seed(event_id: u64) -> u64 {
    mix64(event_id ^ EVENT_SEED)
}

#[derive(Clone, Debug)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator with an explicit seed (used for the static tables).
    #[inline(always)]
    pub(crate) const fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The stream for one field of one event: `event_seed(id) ^ stream(tag)`.
    #[inline(always)]
    pub(crate) fn field(event_seed: u64, stream: u64) -> Self {
        Rng { state: event_seed ^ stream }
    }

    #[inline(always)]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// Uniform 32-bit signed int (like `SplittableRandom.nextInt()`).
    #[inline(always)]
    pub(crate) fn next_i32(&mut self) -> i32 {
        (self.next_u64() >> 32) as u32 as i32
    }

    /// Uniform in `[0, 1)` with 53 bits (like `SplittableRandom.nextDouble()`).
    #[inline(always)]
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[0, n)`, unbiased (Lemire's multiply-shift with rejection).
    /// Plays the role of `nextInt(bound)` / `LongGenerator.nextLong`.
    #[inline(always)]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        let mut m = (self.next_u64() as u128) * (n as u128);
        let mut low = m as u64;
        if low < n {
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                m = (self.next_u64() as u128) * (n as u128);
                low = m as u64;
            }
        }
        (m >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = Rng::new(42);
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[r.below(7) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
        let mut f = Rng::new(7);
        for _ in 0..10_000 {
            let x = f.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }

    #[test]
    fn streams_are_distinct() {
        let s: Vec<u64> = (0..64).map(stream).collect();
        for i in 0..s.len() {
            for j in 0..i {
                assert_ne!(s[i], s[j]);
            }
        }
    }
}
