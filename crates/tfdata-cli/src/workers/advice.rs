//! Asking the dispatcher how many workers to run: `GetScalingAdvice` with
//! the supervisor's bounds (the dispatcher keeps the last bounds it was
//! given and does not probe past them).

use std::time::Duration;

use tfdata_proto::tfdata::status::{
    GetScalingAdviceRequest, ScalingAdvice, status_service_client::StatusServiceClient,
};
use tfdata_rpc::security::RpcChannel;

use super::plan::Bounds;

/// How long one call may take. Well under any sensible poll interval's
/// back-off cap, so a hung dispatcher delays reaping dead workers by at
/// most this.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// What one call gave.
pub enum Reply {
    Advice(ScalingAdvice),
    /// UNIMPLEMENTED, with the dispatcher's message.
    NoController(String),
    /// Unreachable, timed out, or any other error: why.
    Failed(String),
}

pub struct AdviceClient {
    client: StatusServiceClient<RpcChannel>,
    address: String,
}

impl AdviceClient {
    /// A client of the dispatcher at `address` (host:port), with the
    /// process's transport security. The channel connects lazily: an
    /// unreachable dispatcher is a failed call, not a failed start.
    pub fn new(address: &str) -> anyhow::Result<AdviceClient> {
        let security = tfdata_rpc::security::TransportSecurity::process_default()?.client()?;
        let channel = tfdata_rpc::channel::channel(address, &security)?;
        Ok(AdviceClient {
            client: StatusServiceClient::new(channel),
            address: address.to_string(),
        })
    }

    pub async fn ask(&mut self, bounds: Bounds) -> Reply {
        let request = GetScalingAdviceRequest {
            min_workers: i64::try_from(bounds.min).unwrap_or(i64::MAX),
            max_workers: i64::try_from(bounds.max).unwrap_or(i64::MAX),
        };
        match tokio::time::timeout(CALL_TIMEOUT, self.client.get_scaling_advice(request)).await {
            Err(_) => Reply::Failed(format!(
                "no answer from the dispatcher at {} within {CALL_TIMEOUT:?}",
                self.address
            )),
            Ok(Ok(advice)) => Reply::Advice(advice.into_inner()),
            Ok(Err(status)) if status.code() == tonic::Code::Unimplemented => {
                Reply::NoController(status.message().to_string())
            }
            Ok(Err(status)) => Reply::Failed(format!(
                "GetScalingAdvice at {}: {:?}: {}",
                self.address,
                status.code(),
                status.message()
            )),
        }
    }
}
