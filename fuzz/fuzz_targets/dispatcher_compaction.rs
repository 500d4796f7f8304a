//! A journal compaction snapshot (`tfdata.snapshot.DispatcherSnapshot`)
//! decoded and restored with `DispatcherState::from_snapshot`. A restored
//! state must survive its own snapshot: `from_snapshot(to_snapshot(s)) == s`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tfdata_fuzz::dispatcher::{DispatcherState, same_state};
use tfdata_proto::tfdata::snapshot::DispatcherSnapshot;

fuzz_target!(|data: &[u8]| {
    let Ok(snapshot) = DispatcherSnapshot::decode(data) else {
        return;
    };
    let Ok(state) = DispatcherState::from_snapshot(&snapshot) else {
        return;
    };
    let again = DispatcherState::from_snapshot(&state.to_snapshot())
        .expect("a restored state's own snapshot restores");
    assert!(same_state(&again, &state), "snapshot round trip");
});
