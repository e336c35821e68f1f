//! Keys and their stable hash.
//!
//! Routing a record to a subtask and finding its state must give the same answer in every
//! process, on every machine and in every version of eddy, so a key is first encoded to
//! bytes by [`Key::encode_key`] (a fixed, documented encoding) and those bytes are hashed
//! with a fixed-seed XXH3. Rust's `DefaultHasher` is randomly seeded and never used here.

/// The stable 64-bit hash of a key's encoded bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyHash(pub u64);

impl KeyHash {
    /// The 32-bit hash that key-group assignment starts from (Flink's `key.hashCode()`).
    pub fn as_i32(self) -> i32 {
        self.0 as u32 as i32
    }
}

/// Hashes encoded key bytes. Fixed seed: never change it, checkpoints depend on it.
pub fn stable_hash(encoded_key: &[u8]) -> KeyHash {
    KeyHash(xxhash_rust::xxh3::xxh3_64(encoded_key))
}

/// A type that can be the key of a keyed stream.
///
/// The encoding must be injective (two different keys never encode to the same bytes) and
/// must never change between versions: the bytes decide the key group, so a change would
/// send a restored key's records to a subtask that does not hold its state. Integers are
/// big-endian with the sign bit flipped (so that byte order is numeric order), strings and
/// byte vectors carry a 4-byte length prefix so that tuples of them stay injective.
pub trait Key: Clone + Send + 'static {
    /// Appends this key's bytes to `out`.
    fn encode_key(&self, out: &mut Vec<u8>);
}

macro_rules! unsigned_key {
    ($($t:ty),*) => {$(
        impl Key for $t {
            fn encode_key(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_be_bytes());
            }
        }
    )*};
}
unsigned_key!(u8, u16, u32, u64, u128);

macro_rules! signed_key {
    ($($t:ty => $u:ty),*) => {$(
        impl Key for $t {
            fn encode_key(&self, out: &mut Vec<u8>) {
                let flipped = (*self as $u) ^ (1 << (<$u>::BITS - 1));
                out.extend_from_slice(&flipped.to_be_bytes());
            }
        }
    )*};
}
signed_key!(i8 => u8, i16 => u16, i32 => u32, i64 => u64, i128 => u128);

impl Key for usize {
    fn encode_key(&self, out: &mut Vec<u8>) {
        // Always 8 bytes, so that 32- and 64-bit machines agree.
        (*self as u64).encode_key(out);
    }
}

impl Key for bool {
    fn encode_key(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
}

impl Key for char {
    fn encode_key(&self, out: &mut Vec<u8>) {
        (*self as u32).encode_key(out);
    }
}

fn encode_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

impl Key for String {
    fn encode_key(&self, out: &mut Vec<u8>) {
        encode_bytes(self.as_bytes(), out);
    }
}

impl Key for Vec<u8> {
    fn encode_key(&self, out: &mut Vec<u8>) {
        encode_bytes(self, out);
    }
}

impl Key for () {
    fn encode_key(&self, _out: &mut Vec<u8>) {}
}

impl<T: Key> Key for Option<T> {
    fn encode_key(&self, out: &mut Vec<u8>) {
        match self {
            None => out.push(0),
            Some(value) => {
                out.push(1);
                value.encode_key(out);
            }
        }
    }
}

macro_rules! tuple_key {
    ($($name:ident),+) => {
        impl<$($name: Key),+> Key for ($($name,)+) {
            #[allow(non_snake_case)]
            fn encode_key(&self, out: &mut Vec<u8>) {
                let ($($name,)+) = self;
                $($name.encode_key(out);)+
            }
        }
    };
}
tuple_key!(A);
tuple_key!(A, B);
tuple_key!(A, B, C);
tuple_key!(A, B, C, D);

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded<K: Key>(key: &K) -> Vec<u8> {
        let mut out = Vec::new();
        key.encode_key(&mut out);
        out
    }

    #[test]
    fn hash_is_pinned_so_that_checkpoints_stay_valid_across_versions() {
        // If this changes, every stored key group is wrong: never update these numbers.
        assert_eq!(stable_hash(b"").0, 0x2d06800538d394c2);
        assert_eq!(
            stable_hash(&encoded(&"/api/42".to_string())).0,
            stable_hash(&[0, 0, 0, 7, b'/', b'a', b'p', b'i', b'/', b'4', b'2']).0
        );
        assert_eq!(encoded(&42u64), vec![0, 0, 0, 0, 0, 0, 0, 42]);
    }

    #[test]
    fn signed_integers_encode_in_numeric_byte_order() {
        let values = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for pair in values.windows(2) {
            assert!(encoded(&pair[0]) < encoded(&pair[1]), "{} vs {}", pair[0], pair[1]);
        }
    }

    #[test]
    fn tuples_of_strings_are_injective() {
        let a = ("ab".to_string(), "c".to_string());
        let b = ("a".to_string(), "bc".to_string());
        assert_ne!(encoded(&a), encoded(&b));
        assert_ne!(encoded(&Some(0u8)), encoded(&None::<u8>));
    }
}
