//! The dispatcher's admin HTTP endpoint (on `http_port`, beside the gRPC
//! port): `/metrics`, `/healthz` and `/readyz` from
//! [`tfdata_rpc::admin::router`]. The status page (`/`, `/api/status`)
//! adds its routes by merging a router of its own built on the same
//! [`DispatcherSlot`] (`server::start_http` does:
//! `http::router(slot.clone(), health).merge(status_page::routes(slot))`),
//! and reads its numbers from [`Dispatcher::overview`], the slot being
//! its [`OverviewSource`].

use std::sync::{Arc, OnceLock};

use axum::Router;
use tfdata_rpc::admin::MetricsFn;
use tfdata_rpc::health::Health;

use crate::dispatcher::Dispatcher;
use crate::overview::Overview;
use crate::serving::status_page::OverviewSource;

/// The dispatcher the endpoint reports on. The endpoint serves from the
/// start, while the journal is replayed (`/readyz` says so); the slot is
/// filled once the dispatcher exists.
#[derive(Clone, Default)]
pub struct DispatcherSlot(Arc<OnceLock<Arc<Dispatcher>>>);

impl DispatcherSlot {
    /// A slot holding `dispatcher` already (in-process servers recover
    /// before they serve).
    pub fn with(dispatcher: Arc<Dispatcher>) -> Self {
        let slot = DispatcherSlot::default();
        slot.set(dispatcher);
        slot
    }

    /// Fills the slot; a second call is ignored.
    pub fn set(&self, dispatcher: Arc<Dispatcher>) {
        let _ = self.0.set(dispatcher);
    }

    /// The dispatcher, once its journal is replayed.
    pub fn get(&self) -> Option<&Arc<Dispatcher>> {
        self.0.get()
    }
}

impl OverviewSource for DispatcherSlot {
    async fn overview(&self) -> Option<Overview> {
        let dispatcher = self.get()?;
        Some(dispatcher.overview().await)
    }
}

/// `/metrics`, `/healthz` and `/readyz` for the dispatcher in `slot`.
/// Before it exists `/metrics` answers an empty exposition.
pub fn router(slot: DispatcherSlot, health: Health) -> Router {
    let metrics: MetricsFn = Arc::new(move |format| {
        let dispatcher = slot.get().cloned();
        Box::pin(async move {
            match dispatcher {
                Some(d) => d.encode_metrics_as(format).await,
                None => tfdata_rpc::metrics::encode_as(&Default::default(), format),
            }
        })
    });
    tfdata_rpc::admin::router(health, metrics)
}
