//! `RandomIndexShuffle`: where index `i` of `0..=max_index` lands in a
//! pseudorandom permutation picked by a three-word seed, as TensorFlow 2.21
//! computes it (`tf.random.experimental.index_shuffle`).
//!
//! The permutation is a cycle-walking cipher: Simon (a Feistel network of
//! `rounds` rounds) on blocks of `B` bits, `B` the even number of bits
//! `ceil(log2(max_index))` rounds up to, at least 16 (at most 64), keyed by
//! the seed's three words; an index is encrypted again until it falls in
//! `0..=max_index`. The key schedule is Simon's with TensorFlow's constants
//! cut to the word size `W = B / 2` (`c = 0xfffffffc`, `z =
//! 0x7369f885192c0ef5`), as its `std::bitset<W>` arithmetic cuts them.

use tfdata_core::{DType, Error, Result, Tensor};

use super::{Compute, KernelDef, check_size, expect_inputs, one_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "RandomIndexShuffle",
    outputs: one_output,
    build,
}];

/// Encryptions before cycle walking gives up: the block is at most four
/// times the range, so a walk this long never happens with a permutation.
const MAX_WALK: u32 = 1 << 24;

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(message.to_string())
}

/// `x` rotated left by `r` within `w` bits.
fn rotl(x: u64, r: u32, w: u32, mask: u64) -> u64 {
    ((x << r) | (x >> (w - r))) & mask
}

fn rotr(x: u64, r: u32, w: u32, mask: u64) -> u64 {
    ((x >> r) | (x << (w - r))) & mask
}

/// Simon's round function on a `w`-bit word.
fn simon_f(x: u64, w: u32, mask: u64) -> u64 {
    (rotl(x, 1, w, mask) & rotl(x, 8, w, mask)) ^ rotl(x, 2, w, mask)
}

/// The round keys for `rounds` rounds of `w`-bit words.
fn key_schedule(key: [u32; 3], rounds: usize, w: u32, mask: u64) -> Vec<u64> {
    let c = 0xffff_fffc_u64 & mask;
    let mut z = 0x7369_f885_192c_0ef5_u64 & mask;
    let mut rk: Vec<u64> = key.iter().map(|&k| u64::from(k) & mask).collect();
    for i in 3..rounds {
        let next =
            c ^ (z & 1) ^ rk[i - 3] ^ rotr(rk[i - 1], 3, w, mask) ^ rotr(rk[i - 1], 4, w, mask);
        rk.push(next);
        z >>= 1;
    }
    rk
}

/// One Simon encryption of a `2w`-bit block.
fn encrypt(value: u64, round_keys: &[u64], w: u32, mask: u64) -> u64 {
    let mut left = if w == 64 { 0 } else { (value >> w) & mask };
    let mut right = value & mask;
    for pair in round_keys.chunks_exact(2) {
        left ^= simon_f(right, w, mask);
        left ^= pair[0];
        right ^= simon_f(left, w, mask);
        right ^= pair[1];
    }
    if w >= 64 { right } else { (left << w) | right }
}

/// Where `index` lands in the permutation of `0..=max_index` for `key`.
pub(crate) fn index_shuffle(
    index: u64,
    key: [u32; 3],
    max_index: u64,
    rounds: usize,
) -> Result<u64> {
    if max_index == 0 {
        return Ok(0);
    }
    // `std::log2` of the index as a double (2^64 - 1 rounds to 2^64).
    let bits = (max_index as f64).log2().ceil() as u32;
    let block = (bits + bits % 2).clamp(16, 64);
    let w = block / 2;
    let mask = if w >= 64 { u64::MAX } else { (1u64 << w) - 1 };
    let round_keys = key_schedule(key, rounds, w, mask);
    let mut new_index = index;
    for _ in 0..MAX_WALK {
        new_index = encrypt(new_index, &round_keys, w, mask);
        if new_index <= max_index {
            return Ok(new_index);
        }
    }
    Err(invalid("RandomIndexShuffle: cycle walking did not end"))
}

/// An integer tensor's values as TensorFlow casts them to `uint64` (signed
/// values sign-extend; index and maximum are checked non-negative first).
fn as_u64s(t: &Tensor) -> Result<Vec<u64>> {
    Ok(match t.dtype() {
        DType::Int32 => t.to_vec::<i32>()?.into_iter().map(|x| x as u64).collect(),
        DType::UInt32 => t.to_vec::<u32>()?.into_iter().map(u64::from).collect(),
        DType::Int64 => t.to_vec::<i64>()?.into_iter().map(|x| x as u64).collect(),
        DType::UInt64 => t.to_vec::<u64>()?,
        other => return Err(invalid(format!("Invalid seed type: {other}"))),
    })
}

/// TensorFlow's `TensorShape::DebugString`.
fn debug_shape(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let dtype = attrs.dtype("dtype")?;
    if !matches!(
        dtype,
        DType::Int32 | DType::Int64 | DType::UInt32 | DType::UInt64
    ) {
        return Err(attrs.error(format!("RandomIndexShuffle has no kernel for {dtype}")));
    }
    let rounds = attrs.int_or("rounds", 4)?;
    if rounds < 4 || rounds % 2 != 0 {
        return Err(attrs.error(format!(
            "rounds must be an even number of at least 4, got {rounds}"
        )));
    }
    // The key schedule is linear in the rounds: keep it small.
    if rounds > 1024 {
        return Err(attrs.error(format!("rounds {rounds} is more than tfdata allows (1024)")));
    }
    let rounds = rounds as usize;
    Ok(Box::new(move |inputs| {
        const OP: &str = "RandomIndexShuffle";
        expect_inputs(OP, &inputs, 3)?;
        let (index_t, seed_t, max_t) = (&inputs[0], &inputs[1], &inputs[2]);
        let all_scalar =
            index_t.shape().is_empty() && seed_t.shape().len() == 1 && max_t.shape().is_empty();
        let outputs = index_t
            .num_elements()
            .max(max_t.num_elements())
            .max(seed_t.num_elements() / 3);
        let n = outputs as i64;
        if !(index_t.shape().is_empty() || index_t.shape() == [n]) {
            return Err(invalid("Index bust be a scalar or vector."));
        }
        if !(seed_t.shape() == [3] || seed_t.shape() == [n, 3]) {
            return Err(invalid(format!(
                "Seed must be a vector of size [3] or a matrix of size [{n}, 3] but got {}.",
                debug_shape(seed_t.shape())
            )));
        }
        if !(max_t.shape().is_empty() || max_t.shape() == [n]) {
            return Err(invalid(format!(
                "Maxval must be a scalar or a vector of the same size as index but got {}",
                debug_shape(max_t.shape())
            )));
        }
        check_size(OP, dtype, outputs)?;
        let (index, seed, max) = (as_u64s(index_t)?, as_u64s(seed_t)?, as_u64s(max_t)?);
        let at = |v: &[u64], i: usize| if v.len() == 1 { v[0] } else { v[i] };
        let mut out = Vec::with_capacity(outputs as usize);
        for i in 0..outputs as usize {
            let row = if seed_t.shape().len() == 1 { 0 } else { i };
            // Seeds cast to uint32: their low 32 bits.
            let key = [
                seed[3 * row] as u32,
                seed[3 * row + 1] as u32,
                seed[3 * row + 2] as u32,
            ];
            let (ix, mx) = (at(&index, i), at(&max, i));
            // Signed inputs' negatives, checked on their signed values.
            let signed = matches!(dtype, DType::Int32 | DType::Int64);
            if signed && (ix as i64) < 0 {
                return Err(invalid(format!("index must be >= 0 but was {}", ix as i64)));
            }
            if signed && (mx as i64) < 0 {
                return Err(invalid(format!(
                    "max_index must be >= 0 but was {}",
                    mx as i64
                )));
            }
            if mx < ix {
                return Err(invalid(format!(
                    "max_index must be >= index, but {mx} < {ix}"
                )));
            }
            out.push(index_shuffle(ix, key, mx, rounds)?);
        }
        let shape = if all_scalar { vec![] } else { vec![n] };
        match dtype {
            DType::Int32 => {
                Tensor::from_slice(&out.iter().map(|&x| x as i32).collect::<Vec<_>>(), shape)
            }
            DType::UInt32 => {
                Tensor::from_slice(&out.iter().map(|&x| x as u32).collect::<Vec<_>>(), shape)
            }
            DType::Int64 => {
                Tensor::from_slice(&out.iter().map(|&x| x as i64).collect::<Vec<_>>(), shape)
            }
            _ => Tensor::from_slice(&out, shape),
        }
        .map(|t| vec![t])
    }))
}

#[cfg(test)]
mod tests {
    use super::index_shuffle;

    #[test]
    fn a_permutation_of_the_range() {
        for max in [0u64, 1, 9, 100, 70000] {
            let mut seen: Vec<u64> = (0..=max)
                .map(|i| index_shuffle(i, [1, 2, 3], max, 4).unwrap())
                .collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..=max).collect::<Vec<_>>());
        }
    }
}
