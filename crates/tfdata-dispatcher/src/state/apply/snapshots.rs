//! `Snapshot`: a `distributed_save` started (its path, resumed after a
//! restart).

use tfdata_core::Result;
use tfdata_proto::data::SnapshotUpdate;

use crate::state::DispatcherState;

impl DispatcherState {
    pub(super) fn apply_snapshot(&mut self, u: &SnapshotUpdate) -> Result<()> {
        self.snapshots.insert(u.path.clone());
        Ok(())
    }
}
