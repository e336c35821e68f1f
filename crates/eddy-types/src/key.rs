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
    /// Reads a key written by [`Key::encode_key`] from the front of `bytes`, advancing it;
    /// `None` if the bytes are not such a key.
    fn decode_key(bytes: &mut &[u8]) -> Option<Self>;
}

/// Decodes a whole byte string as one key.
pub fn decode_whole_key<K: Key>(mut bytes: &[u8]) -> Option<K> {
    let key = K::decode_key(&mut bytes)?;
    bytes.is_empty().then_some(key)
}

fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if bytes.len() < n {
        return None;
    }
    let (head, tail) = bytes.split_at(n);
    *bytes = tail;
    Some(head)
}

macro_rules! unsigned_key {
    ($($t:ty),*) => {$(
        impl Key for $t {
            fn encode_key(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_be_bytes());
            }
            fn decode_key(bytes: &mut &[u8]) -> Option<Self> {
                Some(<$t>::from_be_bytes(take(bytes, std::mem::size_of::<$t>())?.try_into().ok()?))
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
            fn decode_key(bytes: &mut &[u8]) -> Option<Self> {
                Some((<$u>::decode_key(bytes)? ^ (1 << (<$u>::BITS - 1))) as $t)
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
    fn decode_key(bytes: &mut &[u8]) -> Option<Self> {
        usize::try_from(u64::decode_key(bytes)?).ok()
    }
}

impl Key for bool {
    fn encode_key(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn decode_key(bytes: &mut &[u8]) -> Option<Self> {
        match take(bytes, 1)? {
            [0] => Some(false),
            [1] => Some(true),
            _ => None,
        }
    }
}

impl Key for char {
    fn encode_key(&self, out: &mut Vec<u8>) {
        (*self as u32).encode_key(out);
    }
    fn decode_key(bytes: &mut &[u8]) -> Option<Self> {
        char::from_u32(u32::decode_key(bytes)?)
    }
}

fn encode_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn decode_bytes<'a>(bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = u32::decode_key(bytes)? as usize;
    take(bytes, len)
}

impl Key for String {
    fn encode_key(&self, out: &mut Vec<u8>) {
        encode_bytes(self.as_bytes(), out);
    }
    fn decode_key(bytes: &mut &[u8]) -> Option<Self> {
        String::from_utf8(decode_bytes(bytes)?.to_vec()).ok()
    }
}

impl Key for Vec<u8> {
    fn encode_key(&self, out: &mut Vec<u8>) {
        encode_bytes(self, out);
    }
    fn decode_key(bytes: &mut &[u8]) -> Option<Self> {
        Some(decode_bytes(bytes)?.to_vec())
    }
}

impl Key for () {
    fn encode_key(&self, _out: &mut Vec<u8>) {}
    fn decode_key(_bytes: &mut &[u8]) -> Option<Self> {
        Some(())
    }
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
    fn decode_key(bytes: &mut &[u8]) -> Option<Self> {
        match take(bytes, 1)? {
            [0] => Some(None),
            [1] => Some(Some(T::decode_key(bytes)?)),
            _ => None,
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
            fn decode_key(bytes: &mut &[u8]) -> Option<Self> {
                Some(($($name::decode_key(bytes)?,)+))
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
    fn every_key_type_decodes_what_it_encodes() {
        fn round_trip<K: Key + PartialEq + std::fmt::Debug>(key: K) {
            assert_eq!(decode_whole_key::<K>(&encoded(&key)), Some(key));
        }
        round_trip(0u8);
        round_trip(u64::MAX);
        round_trip(-5i32);
        round_trip(i64::MIN);
        round_trip(123usize);
        round_trip(true);
        round_trip('é');
        round_trip("/api/42".to_string());
        round_trip(vec![1u8, 2, 3]);
        round_trip(Some(("a".to_string(), 7u16)));
        round_trip(None::<u8>);
        round_trip((1u8, "x".to_string(), -1i8, ()));
        assert_eq!(decode_whole_key::<u32>(&[0, 0, 1]), None, "truncated");
        assert_eq!(decode_whole_key::<u8>(&[1, 2]), None, "trailing bytes");
        assert_eq!(decode_whole_key::<String>(&[0, 0, 0, 1, 0xff]), None, "not UTF-8");
    }

    #[test]
    fn tuples_of_strings_are_injective() {
        let a = ("ab".to_string(), "c".to_string());
        let b = ("a".to_string(), "bc".to_string());
        assert_ne!(encoded(&a), encoded(&b));
        assert_ne!(encoded(&Some(0u8)), encoded(&None::<u8>));
    }
}
