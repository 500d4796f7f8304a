//! Journal `Update`s applied to a fresh `DispatcherState`, as a restart
//! replays them. Input: length-delimited `Update` messages (at most 64).
//! Checked: an update that fails leaves the state unchanged (as `apply`
//! promises), and the state survives its compaction after every update.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tfdata_fuzz::dispatcher::{DispatcherState, same_state};
use tfdata_proto::data::Update;

fuzz_target!(|data: &[u8]| {
    let mut buf = data;
    let mut state = DispatcherState::new();
    for _ in 0..64 {
        if buf.is_empty() {
            break;
        }
        let Ok(update) = Update::decode_length_delimited(&mut buf) else {
            break;
        };
        let before = state.clone();
        if let Err(e) = state.apply(&update) {
            assert!(
                same_state(&state, &before),
                "a failed apply changed the state: {e}"
            );
            continue;
        }
        let restored = DispatcherState::from_compacted(&state.to_compacted())
            .expect("the state after an update restores from its compaction");
        assert!(
            same_state(&restored, &state),
            "compaction round trip after {update:?}"
        );
    }
});
