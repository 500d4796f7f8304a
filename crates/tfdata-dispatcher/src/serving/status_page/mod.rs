//! The dispatcher's status page, on its admin HTTP endpoint beside
//! `/metrics`, `/healthz` and `/readyz`:
//!
//! * `GET /`: a page for people. Workers, readers, jobs and iterations,
//!   datasets and snapshots, and a verdict on where the bottleneck is. It
//!   refreshes itself (a small inline script fetches `/?part=main` every
//!   few seconds; a `<noscript>` meta refresh without JavaScript) and loads
//!   nothing from anywhere else, so it works offline and on air-gapped
//!   clusters. Its Content-Security-Policy allows its own script only.
//! * `GET /api/status`: the same figures as JSON, every row.
//!
//! * [`verdict`]: the bottleneck rules, apart from any rendering;
//! * [`report`]: the rows and summary taken from one [`Overview`];
//! * [`html`] and [`json`]: the two renderings of a report;
//! * [`autocache`]: the autocache section and its JSON rows (issue 36);
//! * `table`: the table pieces the sections share;
//! * [`scaling`]: the scaling controller's section and JSON object;
//! * [`format`]: numbers, times and HTML escaping.
//!
//! The page reads the dispatcher through one query only, the [`Overview`]
//! its [`OverviewSource`] gives (the one `tfdata status` renders too),
//! taken under the state's lock once per request; it knows nothing of the
//! dispatcher or its state machine. Rendering is bounded by the row caps.

pub mod autocache;
pub mod format;
pub mod html;
pub mod json;
pub mod report;
pub mod scaling;
mod table;
pub mod verdict;

#[cfg(test)]
mod fixtures;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::overview::Overview;
use report::StatusReport;

/// Where the page's figures come from: a dispatcher's [`Overview`], or
/// `None` while there is none to ask yet (its journal is being replayed).
pub trait OverviewSource: Clone + Send + Sync + 'static {
    fn overview(&self) -> impl Future<Output = Option<Overview>> + Send;
}

/// `/` and `/api/status` over the overviews of `slot` (before there is
/// one, while the dispatcher's journal is replayed, both answer 503 and say
/// so). Merged into the admin endpoint's routes.
pub fn routes(slot: impl OverviewSource) -> Router {
    let page_slot = slot.clone();
    Router::new()
        .route(
            "/",
            get(move |uri: Uri| {
                let slot = page_slot.clone();
                async move { page(&slot, &uri).await }
            }),
        )
        .route(
            "/api/status",
            get(move || {
                let slot = slot.clone();
                async move { api_status(&slot).await }
            }),
        )
}

/// The report of the dispatcher `slot` reads, if it serves yet.
async fn report(slot: &impl OverviewSource) -> Option<StatusReport> {
    Some(StatusReport::new(&slot.overview().await?))
}

async fn page(slot: &impl OverviewSource, uri: &Uri) -> Response {
    let content_only = uri
        .query()
        .is_some_and(|q| q.split('&').any(|pair| pair == "part=main"));
    let (status, title, body) = match report(slot).await {
        Some(report) => (StatusCode::OK, html::title(&report), html::content(&report)),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "starting · tfdata dispatcher".to_string(),
            html::replaying(),
        ),
    };
    if content_only {
        return html_response(status, body, "script-src 'none'");
    }
    let nonce = format!("{:032x}", rand::random::<u128>());
    html_response(
        status,
        html::page(&title, &body, &nonce),
        &format!("script-src 'nonce-{nonce}'"),
    )
}

/// An HTML response that may load nothing from elsewhere: only its own
/// styles, its one script (`script`), and fetches from this endpoint.
fn html_response(status: StatusCode, body: String, script: &str) -> Response {
    let policy = format!(
        "default-src 'none'; {script}; style-src 'unsafe-inline'; connect-src 'self'; \
         img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    );
    let mut response = (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&policy) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, value);
    }
    response
}

async fn api_status(slot: &impl OverviewSource) -> Response {
    let (status, value) = match report(slot).await {
        Some(report) => (StatusCode::OK, json::status(&report)),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({ "ready": false, "reason": "replaying the journal" }),
        ),
    };
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        value.to_string(),
    )
        .into_response()
}
