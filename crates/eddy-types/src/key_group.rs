//! Key groups: the unit in which keyed state is stored, snapshotted and moved on rescale.
//!
//! The formulas are exactly Flink's `KeyGroupRangeAssignment`, so that a job's key → key
//! group → subtask layout is the same as Flink's for the same key hashes:
//!
//! - `key_group = murmur(key_hash) % max_parallelism`
//! - `subtask = key_group * parallelism / max_parallelism`
//! - subtask `i` owns `[(i*maxP + p - 1) / p, ((i+1)*maxP - 1) / p]`

use crate::error::TypesError;
use crate::key::KeyHash;
use std::fmt;

/// Flink's default max parallelism when none is set.
pub const DEFAULT_MAX_PARALLELISM: u32 = 128;
/// Flink's upper bound for max parallelism (`1 << 15`).
pub const UPPER_BOUND_MAX_PARALLELISM: u32 = 1 << 15;

/// The number of key groups of a job: the highest parallelism a keyed operator can ever
/// be rescaled to. Fixed for the life of the job's state.
///
/// It carries the reciprocal of its value, so that the modulo and the division of the
/// formulas, done for every record on both sides of a keyed exchange, cost two
/// multiplications instead of a hardware division (Lemire's "faster remainder by direct
/// computation"; exact for every 32-bit dividend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MaxParallelism {
    value: u32,
    /// `ceil(2^64 / value)` (wrapping to 0 for 1).
    reciprocal: u64,
}

impl MaxParallelism {
    /// Checks Flink's bounds, `1..=32768`.
    pub fn new(value: u32) -> Result<Self, TypesError> {
        if value == 0 || value > UPPER_BOUND_MAX_PARALLELISM {
            return Err(TypesError::MaxParallelismOutOfBounds { value, upper: UPPER_BOUND_MAX_PARALLELISM });
        }
        Ok(Self::unchecked(value))
    }

    const fn unchecked(value: u32) -> Self {
        Self { value, reciprocal: (u64::MAX / value as u64).wrapping_add(1) }
    }

    pub fn get(self) -> u32 {
        self.value
    }

    /// `dividend % max_parallelism`.
    #[inline]
    fn remainder(self, dividend: u32) -> u32 {
        let fraction = self.reciprocal.wrapping_mul(u64::from(dividend));
        ((u128::from(fraction) * u128::from(self.value)) >> 64) as u32
    }

    /// `dividend / max_parallelism`; exact for value 1 too, where the reciprocal wrapped.
    #[inline]
    fn quotient(self, dividend: u32) -> u32 {
        if self.value == 1 {
            return dividend;
        }
        ((u128::from(self.reciprocal) * u128::from(dividend)) >> 64) as u32
    }

    /// Checks that `parallelism` of `what` (an operator's name) fits under this bound.
    pub fn check_parallelism(self, what: &str, parallelism: u32) -> Result<(), TypesError> {
        if parallelism == 0 {
            return Err(TypesError::ParallelismZero { what: what.to_string(), parallelism });
        }
        if parallelism > self.value {
            return Err(TypesError::ParallelismAboveMax {
                what: what.to_string(),
                parallelism,
                max_parallelism: self.value,
            });
        }
        Ok(())
    }
}

impl Default for MaxParallelism {
    fn default() -> Self {
        Self::unchecked(DEFAULT_MAX_PARALLELISM)
    }
}

/// One key group, `0..max_parallelism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyGroup(pub u32);

/// An inclusive range of key groups `[start, end]`; empty when `end < start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct KeyGroupRange {
    pub start: u32,
    pub end: u32,
}

impl KeyGroupRange {
    pub fn new(start: u32, end: u32) -> Self {
        Self { start, end }
    }

    /// All key groups of a job with this max parallelism.
    pub fn all(max_parallelism: MaxParallelism) -> Self {
        Self { start: 0, end: max_parallelism.get() - 1 }
    }

    pub fn len(&self) -> u32 {
        if self.end < self.start {
            0
        } else {
            self.end - self.start + 1
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, key_group: KeyGroup) -> bool {
        key_group.0 >= self.start && key_group.0 <= self.end
    }

    /// The key groups of both ranges; for rescaling, where old and new owners overlap.
    pub fn intersection(&self, other: &KeyGroupRange) -> KeyGroupRange {
        KeyGroupRange { start: self.start.max(other.start), end: self.end.min(other.end) }
    }

    pub fn iter(&self) -> impl Iterator<Item = KeyGroup> {
        (self.start..self.end.wrapping_add(1).max(self.start)).map(KeyGroup)
    }
}

impl fmt::Display for KeyGroupRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.start, self.end)
    }
}

/// Flink's `MathUtils.murmurHash(int)`: spreads a 32-bit hash before the modulo.
fn murmur_hash(code: i32) -> i32 {
    let mut h = code as u32;
    h = h.wrapping_mul(0xcc9e_2d51);
    h = h.rotate_left(15);
    h = h.wrapping_mul(0x1b87_3593);
    h = h.rotate_left(13);
    h = h.wrapping_mul(5).wrapping_add(0xe654_6b64);
    h ^= 4;
    // fmix32
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    let code = h as i32;
    if code >= 0 {
        code
    } else if code != i32::MIN {
        -code
    } else {
        0
    }
}

/// Flink's `computeKeyGroupForKeyHash`.
pub fn compute_key_group_for_hash(key_hash: i32, max_parallelism: MaxParallelism) -> KeyGroup {
    KeyGroup(max_parallelism.remainder(murmur_hash(key_hash) as u32))
}

/// The key group of a key, from its stable hash.
pub fn assign_to_key_group(hash: KeyHash, max_parallelism: MaxParallelism) -> KeyGroup {
    compute_key_group_for_hash(hash.as_i32(), max_parallelism)
}

/// Flink's `computeOperatorIndexForKeyGroup`: which subtask owns a key group.
pub fn operator_index_for_key_group(max_parallelism: MaxParallelism, parallelism: u32, key_group: KeyGroup) -> u32 {
    debug_assert!(parallelism >= 1 && parallelism <= max_parallelism.get());
    debug_assert!(key_group.0 < max_parallelism.get());
    // Below 2^30: key groups and parallelism are at most 2^15.
    max_parallelism.quotient(key_group.0 * parallelism)
}

/// Flink's `computeKeyGroupRangeForOperatorIndex`: the key groups subtask `index` owns.
pub fn key_group_range_for_subtask(max_parallelism: MaxParallelism, parallelism: u32, index: u32) -> KeyGroupRange {
    let max = u64::from(max_parallelism.get());
    let p = u64::from(parallelism);
    let i = u64::from(index);
    // Written exactly as Flink writes it, to be checked against it at a glance.
    #[allow(clippy::manual_div_ceil)]
    let start = (i * max + p - 1) / p;
    let end = ((i + 1) * max - 1) / p;
    KeyGroupRange::new(start as u32, end as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn division_by_the_reciprocal_is_exact() {
        let dividends: Vec<u32> = (0..2_000u32)
            .chain([u32::MAX, u32::MAX - 1, 1 << 31, (1 << 31) - 1, 1 << 30, 0x8000_0001, 0xDEAD_BEEF])
            .chain((0..2_000u64).map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32))
            .collect();
        for value in 1..=UPPER_BOUND_MAX_PARALLELISM {
            let max = MaxParallelism::new(value).unwrap();
            for &dividend in &dividends {
                assert_eq!(max.remainder(dividend), dividend % value, "{dividend} % {value}");
                assert_eq!(max.quotient(dividend), dividend / value, "{dividend} / {value}");
            }
        }
    }

    #[test]
    fn murmur_matches_flink_for_known_values() {
        // Values printed by Flink's MathUtils.murmurHash run on a JVM.
        assert_eq!(murmur_hash(0), 593689054);
        assert_eq!(murmur_hash(1), 68075478);
        assert_eq!(murmur_hash(2), 1085422463);
        assert_eq!(murmur_hash(42), 1134849565);
        assert_eq!(murmur_hash(-1), 1982413648);
        // "hello".hashCode() lands in key group 35 of 128 in Flink.
        assert_eq!(compute_key_group_for_hash(99162322, MaxParallelism::default()), KeyGroup(35));
    }

    #[test]
    fn every_key_group_has_exactly_one_owner_and_ranges_are_contiguous() {
        for max in 1..=64u32 {
            let max_p = MaxParallelism::new(max).unwrap();
            for p in 1..=max {
                let mut next_start = 0;
                for i in 0..p {
                    let range = key_group_range_for_subtask(max_p, p, i);
                    assert_eq!(range.start, next_start, "max={max} p={p} i={i}");
                    for kg in range.iter() {
                        assert_eq!(operator_index_for_key_group(max_p, p, kg), i, "max={max} p={p} kg={kg:?}");
                    }
                    next_start = range.end + 1;
                }
                assert_eq!(next_start, max, "max={max} p={p}: all key groups covered");
            }
        }
    }

    #[test]
    fn key_groups_stay_below_max_parallelism() {
        for max in [1u32, 2, 7, 128, 32768] {
            let max_p = MaxParallelism::new(max).unwrap();
            for h in [0i32, 1, -1, i32::MIN, i32::MAX, 123_456_789] {
                assert!(compute_key_group_for_hash(h, max_p).0 < max);
            }
        }
    }

    #[test]
    fn bounds_are_checked_with_a_clear_message() {
        assert!(MaxParallelism::new(0).is_err());
        assert!(MaxParallelism::new(32769).is_err());
        assert!(MaxParallelism::new(32768).is_ok());
        let err = MaxParallelism::new(4).unwrap().check_parallelism("counter", 5).unwrap_err();
        assert!(err.to_string().contains("counter"), "{err}");
        assert!(err.to_string().contains("above its max parallelism 4"), "{err}");
    }
}
