//! The hashes behind `StringToHashBucketFast` (farmhash's `Fingerprint64`,
//! which is `farmhashna::Hash64`) and `StringToHashBucketStrong` (SipHash
//! 2-4), written out because TensorFlow's buckets are part of a model's
//! contract: a vocabulary-free feature column hashed differently would feed
//! the model other embedding rows. Both are checked bit for bit against
//! TensorFlow 2.21 in the tests.

const K0: u64 = 0xc3a5_c85c_97cb_3127;
const K1: u64 = 0xb492_b66f_be98_f273;
const K2: u64 = 0x9ae1_6a3b_2f90_404f;

fn fetch64(s: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&s[i..i + 8]);
    u64::from_le_bytes(b)
}

fn fetch32(s: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&s[i..i + 4]);
    u64::from(u32::from_le_bytes(b))
}

fn shift_mix(v: u64) -> u64 {
    v ^ (v >> 47)
}

fn hash_len16(u: u64, v: u64, mul: u64) -> u64 {
    let mut a = (u ^ v).wrapping_mul(mul);
    a ^= a >> 47;
    let mut b = (v ^ a).wrapping_mul(mul);
    b ^= b >> 47;
    b.wrapping_mul(mul)
}

fn len_0_to_16(s: &[u8]) -> u64 {
    let len = s.len();
    if len >= 8 {
        let mul = K2.wrapping_add(len as u64 * 2);
        let a = fetch64(s, 0).wrapping_add(K2);
        let b = fetch64(s, len - 8);
        let c = b.rotate_right(37).wrapping_mul(mul).wrapping_add(a);
        let d = a.rotate_right(25).wrapping_add(b).wrapping_mul(mul);
        return hash_len16(c, d, mul);
    }
    if len >= 4 {
        let mul = K2.wrapping_add(len as u64 * 2);
        let a = fetch32(s, 0);
        return hash_len16((len as u64).wrapping_add(a << 3), fetch32(s, len - 4), mul);
    }
    if len > 0 {
        let (a, b, c) = (s[0], s[len >> 1], s[len - 1]);
        let y = u32::from(a).wrapping_add(u32::from(b) << 8);
        let z = (len as u32).wrapping_add(u32::from(c) << 2);
        return shift_mix(u64::from(y).wrapping_mul(K2) ^ u64::from(z).wrapping_mul(K0))
            .wrapping_mul(K2);
    }
    K2
}

fn len_17_to_32(s: &[u8]) -> u64 {
    let len = s.len();
    let mul = K2.wrapping_add(len as u64 * 2);
    let a = fetch64(s, 0).wrapping_mul(K1);
    let b = fetch64(s, 8);
    let c = fetch64(s, len - 8).wrapping_mul(mul);
    let d = fetch64(s, len - 16).wrapping_mul(K2);
    hash_len16(
        a.wrapping_add(b)
            .rotate_right(43)
            .wrapping_add(c.rotate_right(30))
            .wrapping_add(d),
        a.wrapping_add(b.wrapping_add(K2).rotate_right(18))
            .wrapping_add(c),
        mul,
    )
}

fn len_33_to_64(s: &[u8]) -> u64 {
    let len = s.len();
    let mul = K2.wrapping_add(len as u64 * 2);
    let a = fetch64(s, 0).wrapping_mul(K2);
    let b = fetch64(s, 8);
    let c = fetch64(s, len - 8).wrapping_mul(mul);
    let d = fetch64(s, len - 16).wrapping_mul(K2);
    let y = a
        .wrapping_add(b)
        .rotate_right(43)
        .wrapping_add(c.rotate_right(30))
        .wrapping_add(d);
    let z = hash_len16(
        y,
        a.wrapping_add(b.wrapping_add(K2).rotate_right(18))
            .wrapping_add(c),
        mul,
    );
    let e = fetch64(s, 16).wrapping_mul(mul);
    let f = fetch64(s, 24);
    let g = y.wrapping_add(fetch64(s, len - 32)).wrapping_mul(mul);
    let h = z.wrapping_add(fetch64(s, len - 24)).wrapping_mul(mul);
    hash_len16(
        e.wrapping_add(f)
            .rotate_right(43)
            .wrapping_add(g.rotate_right(30))
            .wrapping_add(h),
        e.wrapping_add(f.wrapping_add(a).rotate_right(18))
            .wrapping_add(g),
        mul,
    )
}

fn weak_hash_32(s: &[u8], i: usize, mut a: u64, mut b: u64) -> (u64, u64) {
    let (w, x, y, z) = (
        fetch64(s, i),
        fetch64(s, i + 8),
        fetch64(s, i + 16),
        fetch64(s, i + 24),
    );
    a = a.wrapping_add(w);
    b = b.wrapping_add(a).wrapping_add(z).rotate_right(21);
    let c = a;
    a = a.wrapping_add(x).wrapping_add(y);
    b = b.wrapping_add(a.rotate_right(44));
    (a.wrapping_add(z), b.wrapping_add(c))
}

/// farmhash `Fingerprint64` (TensorFlow's `Fingerprint64`).
pub(in crate::kernels) fn fingerprint64(s: &[u8]) -> u64 {
    let len = s.len();
    if len <= 16 {
        return len_0_to_16(s);
    }
    if len <= 32 {
        return len_17_to_32(s);
    }
    if len <= 64 {
        return len_33_to_64(s);
    }
    const SEED: u64 = 81;
    let mut x = SEED;
    let mut y = SEED.wrapping_mul(K1).wrapping_add(113);
    let mut z = shift_mix(y.wrapping_mul(K2).wrapping_add(113)).wrapping_mul(K2);
    let mut v = (0u64, 0u64);
    let mut w = (0u64, 0u64);
    x = x.wrapping_mul(K2).wrapping_add(fetch64(s, 0));
    let end = ((len - 1) / 64) * 64;
    let last64 = len - 64;
    let mut p = 0;
    while p != end {
        x = x
            .wrapping_add(y)
            .wrapping_add(v.0)
            .wrapping_add(fetch64(s, p + 8))
            .rotate_right(37)
            .wrapping_mul(K1);
        y = y
            .wrapping_add(v.1)
            .wrapping_add(fetch64(s, p + 48))
            .rotate_right(42)
            .wrapping_mul(K1);
        x ^= w.1;
        y = y.wrapping_add(v.0).wrapping_add(fetch64(s, p + 40));
        z = z.wrapping_add(w.0).rotate_right(33).wrapping_mul(K1);
        v = weak_hash_32(s, p, v.1.wrapping_mul(K1), x.wrapping_add(w.0));
        w = weak_hash_32(
            s,
            p + 32,
            z.wrapping_add(w.1),
            y.wrapping_add(fetch64(s, p + 16)),
        );
        std::mem::swap(&mut z, &mut x);
        p += 64;
    }
    let mul = K1.wrapping_add((z & 0xff) << 1);
    let p = last64;
    w.0 = w.0.wrapping_add(((len - 1) & 63) as u64);
    v.0 = v.0.wrapping_add(w.0);
    w.0 = w.0.wrapping_add(v.0);
    x = x
        .wrapping_add(y)
        .wrapping_add(v.0)
        .wrapping_add(fetch64(s, p + 8))
        .rotate_right(37)
        .wrapping_mul(mul);
    y = y
        .wrapping_add(v.1)
        .wrapping_add(fetch64(s, p + 48))
        .rotate_right(42)
        .wrapping_mul(mul);
    x ^= w.1.wrapping_mul(9);
    y = y
        .wrapping_add(v.0.wrapping_mul(9))
        .wrapping_add(fetch64(s, p + 40));
    z = z.wrapping_add(w.0).rotate_right(33).wrapping_mul(mul);
    v = weak_hash_32(s, p, v.1.wrapping_mul(mul), x.wrapping_add(w.0));
    w = weak_hash_32(
        s,
        p + 32,
        z.wrapping_add(w.1),
        y.wrapping_add(fetch64(s, p + 16)),
    );
    std::mem::swap(&mut z, &mut x);
    hash_len16(
        hash_len16(v.0, w.0, mul)
            .wrapping_add(shift_mix(y).wrapping_mul(K0))
            .wrapping_add(z),
        hash_len16(v.1, w.1, mul).wrapping_add(x),
        mul,
    )
}

/// SipHash-2-4 keyed with `key` (TensorFlow's `StrongKeyedHash`).
pub(in crate::kernels) fn siphash(key: [u64; 2], data: &[u8]) -> u64 {
    let mut v0 = key[0] ^ 0x736f_6d65_7073_6575;
    let mut v1 = key[1] ^ 0x646f_7261_6e64_6f6d;
    let mut v2 = key[0] ^ 0x6c79_6765_6e65_7261;
    let mut v3 = key[1] ^ 0x7465_6462_7974_6573;
    let round = |v0: &mut u64, v1: &mut u64, v2: &mut u64, v3: &mut u64| {
        *v0 = v0.wrapping_add(*v1);
        *v1 = v1.rotate_left(13) ^ *v0;
        *v0 = v0.rotate_left(32);
        *v2 = v2.wrapping_add(*v3);
        *v3 = v3.rotate_left(16) ^ *v2;
        *v0 = v0.wrapping_add(*v3);
        *v3 = v3.rotate_left(21) ^ *v0;
        *v2 = v2.wrapping_add(*v1);
        *v1 = v1.rotate_left(17) ^ *v2;
        *v2 = v2.rotate_left(32);
    };
    let chunks = data.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        let m = fetch64(c, 0);
        v3 ^= m;
        round(&mut v0, &mut v1, &mut v2, &mut v3);
        round(&mut v0, &mut v1, &mut v2, &mut v3);
        v0 ^= m;
    }
    let mut last = (data.len() as u64 & 0xff) << 56;
    for (i, &b) in tail.iter().enumerate() {
        last |= u64::from(b) << (8 * i);
    }
    v3 ^= last;
    round(&mut v0, &mut v1, &mut v2, &mut v3);
    round(&mut v0, &mut v1, &mut v2, &mut v3);
    v0 ^= last;
    v2 ^= 0xff;
    for _ in 0..4 {
        round(&mut v0, &mut v1, &mut v2, &mut v3);
    }
    v0 ^ v1 ^ v2 ^ v3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strings of the TensorFlow reference run: byte `i` of the string
    /// of length `n` is `(7 i + 13 n) mod 256`.
    fn sample(n: usize) -> Vec<u8> {
        (0..n).map(|i| ((i * 7 + n * 13) % 256) as u8).collect()
    }

    #[test]
    fn fingerprint64_matches_tensorflow() {
        // tf.fingerprint(strings) (farmhash64), as little-endian uint64.
        let expected: &[(usize, u64)] = &[
            (0, 11160318154034397263),
            (1, 9989886642965168390),
            (3, 6192772629295113259),
            (4, 17068679523422708389),
            (8, 7958311906784197040),
            (16, 3066597064894063956),
            (17, 9620333547908591473),
            (32, 8420132330954690047),
            (33, 14381671153856762689),
            (64, 11083064061832698092),
            (65, 3041498187743114328),
            (128, 15838856113771212233),
            (1000, 17426782586603114658),
            (4096, 10945341338592267775),
        ];
        for &(n, want) in expected {
            assert_eq!(fingerprint64(&sample(n)), want, "length {n}");
        }
        // Every length 0..300, folded as acc = acc * 31 + fp, then lengths
        // 1000 and 4096.
        let mut acc = 0u64;
        for n in (0..300).chain([1000, 4096]) {
            acc = acc.wrapping_mul(31).wrapping_add(fingerprint64(&sample(n)));
        }
        assert_eq!(acc, 6992062910600689092);
    }

    #[test]
    fn siphash_matches_tensorflow() {
        // tf.strings.to_hash_bucket_strong(..., 2**62, key=[k0, k1]).
        let key = [0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908];
        let got: Vec<u64> = [&b""[..], b"hello", &[b'a'; 100]]
            .iter()
            .map(|s| siphash(key, s) % (1 << 62))
            .collect();
        assert_eq!(
            got,
            [3634364526009126449, 22433990042967937, 2261120777529022167]
        );
    }
}
