//! The callers' bounds on the scaling target (`GetScalingAdvice`'s
//! `min_workers` and `max_workers`).

/// The callers' bounds on the target (from `GetScalingAdvice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub min: i64,
    pub max: Option<i64>,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { min: 1, max: None }
    }
}

impl Bounds {
    /// The bounds of a `GetScalingAdvice` request: 0 is "none" (the minimum
    /// is then 1: a service with readers needs a worker). Negative values,
    /// or a maximum below the minimum, are refused with the reason.
    pub fn from_request(min: i64, max: i64) -> Result<Self, String> {
        if min < 0 || max < 0 {
            return Err(format!(
                "min_workers ({min}) and max_workers ({max}) must not be negative (0: no bound)"
            ));
        }
        let bounds = Bounds {
            min: min.max(1),
            max: (max > 0).then_some(max),
        };
        if let Some(max) = bounds.max
            && max < bounds.min
        {
            return Err(format!(
                "max_workers ({max}) is below min_workers ({})",
                bounds.min
            ));
        }
        Ok(bounds)
    }

    pub fn clamp(&self, workers: i64) -> i64 {
        let at_least = workers.max(self.min);
        self.max.map_or(at_least, |max| at_least.min(max))
    }
}
