//! Philox4x32-10, as TensorFlow's `PhiloxRandom` runs it: the generator
//! behind every random op and random dataset tfdata reproduces bit for bit
//! (`tfdata-graph`'s random kernels, [`crate::ops::random`]).

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as
/// 1, 2, 3", SC'11): a counter-based generator, one block of four words
/// per counter value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Philox {
    pub counter: [u32; 4],
    pub key: [u32; 2],
}

const PHILOX_M0: u32 = 0xD251_1F53;
const PHILOX_M1: u32 = 0xCD9E_8D57;
const PHILOX_W0: u32 = 0x9E37_79B9;
const PHILOX_W1: u32 = 0xBB67_AE85;

/// Ten Philox rounds of `counter` under `key`.
pub fn philox_block(mut c: [u32; 4], mut key: [u32; 2]) -> [u32; 4] {
    for round in 0..10 {
        if round > 0 {
            key[0] = key[0].wrapping_add(PHILOX_W0);
            key[1] = key[1].wrapping_add(PHILOX_W1);
        }
        let p0 = u64::from(PHILOX_M0) * u64::from(c[0]);
        let p1 = u64::from(PHILOX_M1) * u64::from(c[2]);
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ key[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ key[1],
            p0 as u32,
        ];
    }
    c
}

/// `x`'s low and high words.
pub fn lo_hi(x: u64) -> [u32; 2] {
    [x as u32, (x >> 32) as u32]
}

impl Philox {
    /// Key `seed`, counter `[0, 0, seed2]` (a stateful node's generator).
    pub fn from_seeds(seed: u64, seed2: u64) -> Philox {
        let [c2, c3] = lo_hi(seed2);
        Philox {
            counter: [0, 0, c2, c3],
            key: lo_hi(seed),
        }
    }

    /// The block at the counter; the counter advances by one.
    pub fn next_block(&mut self) -> [u32; 4] {
        let out = philox_block(self.counter, self.key);
        for w in &mut self.counter {
            *w = w.wrapping_add(1);
            if *w != 0 {
                break;
            }
        }
        out
    }

    /// Advances the counter by `n` blocks, carrying as TensorFlow's
    /// `PhiloxRandom::Skip` does.
    pub fn skip(&mut self, n: u64) {
        let lo = n as u32;
        let mut hi = (n >> 32) as u32;
        self.counter[0] = self.counter[0].wrapping_add(lo);
        if self.counter[0] < lo {
            hi = hi.wrapping_add(1);
        }
        self.counter[1] = self.counter[1].wrapping_add(hi);
        if self.counter[1] < hi {
            self.counter[2] = self.counter[2].wrapping_add(1);
            if self.counter[2] == 0 {
                self.counter[3] = self.counter[3].wrapping_add(1);
            }
        }
    }
}

/// One word at a time from a generator's blocks (TensorFlow's
/// `SingleSampleAdapter`), for rejection sampling and shuffles.
#[derive(Clone, Debug)]
pub struct Words {
    rng: Philox,
    block: [u32; 4],
    used: usize,
}

impl Words {
    pub fn new(rng: Philox) -> Words {
        Words {
            rng,
            block: [0; 4],
            used: 4,
        }
    }

    pub fn next_word(&mut self) -> u32 {
        if self.used == 4 {
            self.block = self.rng.next_block();
            self.used = 0;
        }
        self.used += 1;
        self.block[self.used - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_published_known_answers() {
        // Random123's kat_vectors for philox4x32_10.
        assert_eq!(
            philox_block([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox_block([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox_block(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn counter_skips_carry_as_tensorflows() {
        let mut p = Philox {
            counter: [u32::MAX, u32::MAX, u32::MAX, 0],
            key: [0, 0],
        };
        p.next_block();
        assert_eq!(p.counter, [0, 0, 0, 1]);
        let mut q = Philox {
            counter: [u32::MAX - 1, 7, 0, 0],
            key: [0, 0],
        };
        q.skip(3 + (5 << 32));
        assert_eq!(q.counter, [1, 13, 0, 0]);
    }
}
