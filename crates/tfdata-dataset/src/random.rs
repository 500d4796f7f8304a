//! The one source of seeds for unseeded randomness (`shuffle` without a
//! seed, random built-ins and TensorFlow's stateful random kernels with
//! seed 0): [`unseeded_seed`].
//!
//! Normally each draw is fresh entropy, as in TensorFlow. A caller that must
//! rebuild a pipeline identically (a snapshot stream writer restarting from
//! its committed elements) builds and iterates it inside [`with_seed`]: the
//! draws on that thread then come from a generator seeded by the caller, so
//! two builds under one seed draw the same seeds in the same order. The
//! threads the engine starts to run an input ahead ([`fork`]) inherit a
//! generator derived from their creator's, so sequential work moved off the
//! caller's thread stays reproducible too. Work spread over a pool
//! (parallel `map`) does not: which element a pool thread handles is not
//! deterministic, so such threads draw entropy.

use std::cell::RefCell;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

thread_local! {
    /// The generator of the innermost [`with_seed`] on this thread.
    static SEEDED: RefCell<Option<StdRng>> = const { RefCell::new(None) };
}

/// A seed for an op the user gave none: from the current [`with_seed`]
/// scope's generator, else fresh entropy.
pub fn unseeded_seed() -> u64 {
    SEEDED
        .with(|s| s.borrow_mut().as_mut().map(|rng| rng.random()))
        .unwrap_or_else(rand::random)
}

/// Runs `f` with this thread's unseeded draws coming from a generator
/// seeded with `seed`; the previous scope (if any) is restored afterwards,
/// also when `f` panics.
pub fn with_seed<T>(seed: u64, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<StdRng>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            SEEDED.with(|s| *s.borrow_mut() = previous);
        }
    }
    let previous = SEEDED.with(|s| s.borrow_mut().replace(StdRng::seed_from_u64(seed)));
    let _restore = Restore(previous);
    f()
}

/// For a thread about to be started to run sequential work on this
/// thread's behalf: the seed of its own scope, drawn from this thread's
/// scope, or `None` outside any. Pass it to [`with_seed_opt`] on the new
/// thread.
pub fn fork() -> Option<u64> {
    SEEDED.with(|s| s.borrow_mut().as_mut().map(|rng| rng.random()))
}

/// [`with_seed`] when `seed` is set, else just `f()`.
pub fn with_seed_opt<T>(seed: Option<u64>, f: impl FnOnce() -> T) -> T {
    match seed {
        Some(seed) => with_seed(seed, f),
        None => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_draws_repeat_and_nest() {
        let a: Vec<u64> = with_seed(7, || (0..4).map(|_| unseeded_seed()).collect());
        let b: Vec<u64> = with_seed(7, || (0..4).map(|_| unseeded_seed()).collect());
        assert_eq!(a, b);
        let c: Vec<u64> = with_seed(8, || (0..4).map(|_| unseeded_seed()).collect());
        assert_ne!(a, c);
        // An inner scope does not disturb the outer one's sequence.
        let nested = with_seed(7, || {
            let first = unseeded_seed();
            with_seed(99, unseeded_seed);
            [first, unseeded_seed()]
        });
        assert_eq!(nested, [a[0], a[1]]);
        // Outside any scope: entropy (two draws differ with overwhelming odds).
        assert_ne!(unseeded_seed(), unseeded_seed());
        assert_eq!(fork(), None);
    }

    #[test]
    fn forked_threads_repeat() {
        let run = || {
            with_seed(3, || {
                let child = fork();
                std::thread::spawn(move || with_seed_opt(child, unseeded_seed))
                    .join()
                    .unwrap()
            })
        };
        assert_eq!(run(), run());
    }

    /// What the snapshot writer relies on: an unseeded shuffle, built and
    /// iterated twice under one seed, gives one order (also through a
    /// `prefetch` thread); under another seed, another.
    #[test]
    fn unseeded_shuffles_repeat_under_a_seed() {
        use crate::Dataset;
        let order = |seed: u64| -> Vec<i64> {
            with_seed(seed, || {
                let ds = Dataset::range(200)
                    .shuffle(50, None, true)
                    .prefetch(4)
                    .shuffle(10, None, true);
                ds.iter()
                    .unwrap()
                    .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
                    .collect()
            })
        };
        let a = order(11);
        assert_eq!(a, order(11));
        assert_ne!(a, order(12));
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..200).collect::<Vec<_>>());
        assert_ne!(a, sorted, "not shuffled at all");
    }

    #[test]
    fn scope_restored_after_panic() {
        let _ = std::panic::catch_unwind(|| with_seed(1, || panic!("boom")));
        assert_eq!(fork(), None);
    }
}
