//! Which point to cache, from the profile: Cachew's comparison of computing
//! against reading back, per element.

use super::PointCost;

/// A point is cached only if reading an element back costs at most this
/// fraction of computing it. The cache must pay for its writing (the first
/// epoch writes every element once more) and its storage, and the profile's
/// figures come from a small sample on one worker: a saving of less than
/// half the compute is within what a busier worker, a slower disk or a
/// remote store would erase.
pub const MAX_READ_TO_COMPUTE: f64 = 0.5;

/// What [`choose`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// Cache the output of the candidate at `index`.
    Cache { index: usize },
    /// Cache nothing, because `reason` (with the numbers).
    None { reason: String },
}

/// The point with the largest saving (compute − read per element) among
/// those whose read cost is at most [`MAX_READ_TO_COMPUTE`] × compute; on a
/// tie the deeper one (more work skipped). Points with no elements or
/// figures that are not finite are left out.
pub fn choose(points: &[PointCost]) -> Choice {
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
    if measured.is_empty() {
        return Choice::None {
            reason: if points.is_empty() {
                "no candidate point to cache".into()
            } else {
                "no candidate point produced an element to measure".into()
            },
        };
    }
    let saving = |p: &PointCost| p.compute_seconds_per_element - p.read_seconds_per_element;
    let best = measured
        .iter()
        .copied()
        .filter(|p| {
            p.read_seconds_per_element <= MAX_READ_TO_COMPUTE * p.compute_seconds_per_element
        })
        .max_by(|a, b| saving(a).total_cmp(&saving(b)).then(a.point.cmp(&b.point)));
    match best {
        Some(p) if saving(p) > 0.0 => Choice::Cache { index: p.point },
        _ => {
            // The point closest to paying, for the status page.
            let closest = measured
                .iter()
                .copied()
                .max_by(|a, b| saving(a).total_cmp(&saving(b)).then(a.point.cmp(&b.point)))
                .unwrap_or(measured[0]);
            Choice::None {
                reason: format!(
                    "no point pays for its cache: the best, point {}, computes in {} per element \
                     and reads back in {}, more than {MAX_READ_TO_COMPUTE} x compute",
                    closest.point,
                    seconds(closest.compute_seconds_per_element),
                    seconds(closest.read_seconds_per_element),
                ),
            }
        }
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
