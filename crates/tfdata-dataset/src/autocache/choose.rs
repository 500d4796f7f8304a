//! Which point to cache, from the profile: Cachew's comparison of computing
//! against reading back, per element.

use super::PointCost;

/// A point is cached only if later epochs, reading it back and computing
/// the rest of the chain, cost at most this fraction of computing the
/// chain. The cache must pay for its writing (the first epoch writes every
/// element once more) and its storage, and the profile's figures come from
/// a small sample on one worker: a saving of less than half the compute is
/// within what a busier worker, a slower disk or a remote store would
/// erase.
pub const MAX_READ_TO_COMPUTE: f64 = 0.5;

/// A point is cached only if it saves at least this much per element
/// (50 us). The profile pulls a sample of up to 64 elements afresh per
/// point, so start-up (spawning threads, opening files: about a
/// millisecond) is spread over the sample at 10-20 us per element; a
/// smaller saving is within the measurement's own noise. Without this
/// floor, a cheap source (`range`) ahead of an expensive function that
/// cannot be cached (undeclared) was cached or not by that noise alone,
/// though caching it saves nothing.
pub const MIN_SAVING_SECONDS_PER_ELEMENT: f64 = 50e-6;

/// What [`choose`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// Cache the output of the candidate at `index`.
    Cache { index: usize },
    /// Cache nothing, because `reason` (with the numbers).
    None { reason: String },
}

/// The point that makes later epochs cheapest. Uncached, an epoch computes
/// the chain up to its deepest measured point (`C`, that point's compute
/// per element); cached at `p`, it reads `p` back and computes the rest,
/// `read(p) + max(0, C - compute(p))` (the ops after the deepest point
/// run either way). The rest is not measured on its own: the engine fuses
/// consecutive ops (decode and resize become one kernel), so a deeper
/// prefix can compute faster than a shallower one, and the rest then
/// counts as free, which favours the deeper point: caching at the
/// shallower one would run the unfused rest every epoch. Cached only if
/// that cost is at most [`MAX_READ_TO_COMPUTE`] x `C` and saves at least
/// [`MIN_SAVING_SECONDS_PER_ELEMENT`]; on a tie the deeper
/// point (more work skipped). Points with no elements or figures that are
/// not finite are left out. Points in `never` (in-memory sources:
/// [`super::Candidate::in_memory`]) are never chosen, though the deepest
/// may be the reference `C`.
pub fn choose(points: &[PointCost], never: &[usize]) -> Choice {
    let measured: Vec<&PointCost> = points
        .iter()
        .filter(|p| {
            p.elements > 0
                && p.compute_seconds_per_element.is_finite()
                && p.read_seconds_per_element.is_finite()
                && p.compute_seconds_per_element >= 0.0
                && p.read_seconds_per_element >= 0.0
        })
        .collect();
    let Some(deepest) = measured.iter().max_by_key(|p| p.point) else {
        return Choice::None {
            reason: if points.is_empty() {
                "no candidate point to cache".into()
            } else {
                "no candidate point produced an element to measure".into()
            },
        };
    };
    let uncached = deepest.compute_seconds_per_element;
    let later = |p: &PointCost| {
        p.read_seconds_per_element + (uncached - p.compute_seconds_per_element).max(0.0)
    };
    let Some(best) = measured
        .iter()
        .copied()
        .filter(|p| !never.contains(&p.point))
        .min_by(|a, b| later(a).total_cmp(&later(b)).then(b.point.cmp(&a.point)))
    else {
        return Choice::None {
            reason: "the only candidate is an in-memory source (range, from_tensors, \
                     from_tensor_slices), which reading a cache back cannot beat"
                .into(),
        };
    };
    let saving = uncached - later(best);
    if later(best) <= MAX_READ_TO_COMPUTE * uncached && saving >= MIN_SAVING_SECONDS_PER_ELEMENT {
        return Choice::Cache { index: best.point };
    }
    if later(best) <= MAX_READ_TO_COMPUTE * uncached {
        return Choice::None {
            reason: format!(
                "no point pays for its cache: the best, point {}, would save {} per element \
                 ({} computed, {} reading back and the rest), less than the {} a profile can \
                 tell from start-up",
                best.point,
                seconds(saving),
                seconds(uncached),
                seconds(later(best)),
                seconds(MIN_SAVING_SECONDS_PER_ELEMENT),
            ),
        };
    }
    Choice::None {
        reason: format!(
            "no point pays for its cache: the best, point {}, would make later epochs cost {} per \
             element (reading back {}, then the rest) against {} computed, more than \
             {MAX_READ_TO_COMPUTE} x compute",
            best.point,
            seconds(later(best)),
            seconds(best.read_seconds_per_element),
            seconds(uncached),
        ),
    }
}
/// `1.23 ms`, `45.6 us`, `2.00 s`.
fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}
