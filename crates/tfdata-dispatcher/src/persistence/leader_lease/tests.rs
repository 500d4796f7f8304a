//! Unit tests of the parts without I/O: the configuration and the fence's
//! clock. The lease itself is tested on real local directories and a real
//! S3 server in `tests/leader_lease.rs`.

use super::*;

#[test]
fn configs_that_cannot_keep_a_lease_are_refused() {
    LeaseConfig::default().validate().unwrap();
    let ms = Duration::from_millis;
    for (duration, renew, margin, needle) in [
        (ms(0), ms(10), ms(0), "positive"),
        (ms(100), ms(0), ms(10), "positive"),
        (ms(100), ms(10), ms(100), "safety margin"),
        (ms(100), ms(80), ms(20), "renew interval"),
    ] {
        let config = LeaseConfig {
            duration,
            renew_interval: renew,
            safety_margin: margin,
        };
        let err = config.validate().unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidConfig {
                    field: "leader_lease",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains(needle), "{needle}: {err}");
        assert!(LeaderLease::local("/nonexistent", "a:1", config).is_err());
    }
}

#[test]
fn a_fence_holds_until_its_deadline_and_fails_after_a_revocation_or_a_new_generation() {
    let shared = fence::new_shared();
    let f1 = Fence::new(Arc::clone(&shared), 1, "here".into());
    // Issued but never extended: not held.
    assert!(f1.check().unwrap_err().to_string().contains("not held"));

    fence::extend(&shared, 1, Instant::now() + Duration::from_secs(60));
    f1.check().unwrap();
    fence::extend(&shared, 1, Instant::now());
    let err = f1.check().unwrap_err();
    assert!(matches!(err, Error::FailedPrecondition(_)), "{err}");
    assert!(err.to_string().contains("not renewed in time"), "{err}");

    fence::extend(&shared, 1, Instant::now() + Duration::from_secs(60));
    fence::revoke(
        &shared,
        "renewing generation 1 found the lease replaced".into(),
    );
    let err = f1.check().unwrap_err().to_string();
    assert!(err.contains("found the lease replaced"), "{err}");
    assert!(
        err.contains("generation 1") && err.contains("here"),
        "{err}"
    );

    // Winning a later generation does not revive the old generation's
    // fences: writes tagged with it must stay refused.
    fence::extend(&shared, 2, Instant::now() + Duration::from_secs(60));
    let f2 = Fence::new(Arc::clone(&shared), 2, "here".into());
    f2.check().unwrap();
    let err = f1.check().unwrap_err().to_string();
    assert!(err.contains("now holds generation 2"), "{err}");
}
