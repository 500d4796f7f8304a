//! GraphDef source parsing for distributed_epoch
//! (`tfdata_dispatcher::tf_graph::split_providers`): a TensorFlow dataset
//! graph from `GetOrRegisterDataset`, walked to its sources, whose split
//! providers are then asked for a few splits. Graphs naming
//! `MatchingFiles` or a URL are skipped (their providers glob this
//! machine's disk or an object store).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tfdata_dispatcher::tf_graph::split_providers;

fuzz_target!(|data: &[u8]| {
    if !tfdata_fuzz::offline(data) {
        return;
    }
    let Ok(providers) = split_providers(data) else {
        return;
    };
    for p in providers {
        let _ = p.cardinality();
        for _ in 0..4 {
            match p.get_next() {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        let _ = p.reset();
        let _ = p.skip(3);
        let _ = p.get_next();
    }
});
