//! A journal compaction (`tfdata.compaction.CompactedState`) decoded and
//! restored with `DispatcherState::from_compacted`. A restored state must
//! survive its own compaction: `from_compacted(to_compacted(s)) == s`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tfdata_fuzz::dispatcher::{DispatcherState, same_state};
use tfdata_proto::tfdata::compaction::CompactedState;

fuzz_target!(|data: &[u8]| {
    let Ok(compacted) = CompactedState::decode(data) else {
        return;
    };
    let Ok(state) = DispatcherState::from_compacted(&compacted) else {
        return;
    };
    let again = DispatcherState::from_compacted(&state.to_compacted())
        .expect("a restored state's own compaction restores");
    assert!(same_state(&again, &state), "compaction round trip");
});
