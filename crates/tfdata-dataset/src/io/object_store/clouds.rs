//! The clouds: which URL scheme is served by which cloud's client, the
//! client options one can set, and how a bucket's client is built from the
//! environment and those options.

use std::sync::Arc;

use ::object_store::ObjectStore;
use ::object_store::RetryConfig;
use ::object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use ::object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use ::object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use tfdata_core::{Error, Result};

/// The URL schemes served by object stores.
pub const SCHEMES: &[&str] = &["s3", "s3a", "gs", "az", "azure", "adl", "abfs", "abfss"];

/// Which cloud's client serves a scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cloud {
    S3,
    Gcs,
    Azure,
}

impl Cloud {
    pub(super) fn of(scheme: &str) -> Option<Self> {
        match scheme {
            "s3" | "s3a" => Some(Self::S3),
            "gs" => Some(Self::Gcs),
            "az" | "azure" | "adl" | "abfs" | "abfss" => Some(Self::Azure),
            _ => None,
        }
    }

    /// The environment variables that configure this cloud, for error hints.
    pub(super) fn env_hint(self) -> &'static str {
        match self {
            Self::S3 => {
                "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, \
                 AWS_ENDPOINT_URL (and AWS_ALLOW_HTTP=true for http:// endpoints)"
            }
            Self::Gcs => "GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT_KEY",
            Self::Azure => {
                "AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY \
                 (or a SAS token, service principal or managed identity)"
            }
        }
    }
}

/// Whether `scheme` names an object store this module serves.
pub fn is_object_store_scheme(scheme: &str) -> bool {
    Cloud::of(scheme).is_some()
}

/// One configuration option, parsed (so typos fail at construction).
#[derive(Debug, Clone)]
pub(super) enum StoreOption {
    S3(AmazonS3ConfigKey, String),
    Gcs(GoogleConfigKey, String),
    Azure(AzureConfigKey, String),
}

impl StoreOption {
    /// Parses `key` (an `object_store` configuration key with its cloud's
    /// prefix: `aws_`, `google_` or `azure_`, any case); an unknown key is
    /// [`Error::InvalidConfig`].
    pub(super) fn parse(key: &str, value: String) -> Result<Self> {
        let lower = key.to_ascii_lowercase();
        let unknown = |e: ::object_store::Error| Error::InvalidConfig {
            field: "object store option",
            reason: format!("{key}: {e}"),
        };
        if lower.starts_with("aws_") {
            Ok(Self::S3(lower.parse().map_err(unknown)?, value))
        } else if lower.starts_with("google_") {
            Ok(Self::Gcs(lower.parse().map_err(unknown)?, value))
        } else if lower.starts_with("azure_") {
            Ok(Self::Azure(lower.parse().map_err(unknown)?, value))
        } else {
            Err(Error::InvalidConfig {
                field: "object store option",
                reason: format!(
                    "{key}: an option key starts with the cloud it configures: \
                     aws_, google_ or azure_"
                ),
            })
        }
    }
}

/// How the clients of one [`ObjectStoreFileSystem`](super::ObjectStoreFileSystem)
/// are configured. Not `Debug`: options may hold secrets.
pub(super) struct ClientConfig {
    /// Start from the environment, as the clouds' SDKs do.
    pub(super) from_env: bool,
    /// Applied after the environment, in order.
    pub(super) options: Vec<StoreOption>,
    /// `None`: `object_store`'s default.
    pub(super) retry: Option<RetryConfig>,
}

impl ClientConfig {
    /// The client for the bucket `bucket_url` (`s3://bucket`) of `cloud`.
    pub(super) fn build(
        &self,
        bucket_url: &str,
        cloud: Cloud,
    ) -> ::object_store::Result<Arc<dyn ObjectStore>> {
        Ok(match cloud {
            Cloud::S3 => {
                let mut b = if self.from_env {
                    s3_builder_from_env()
                } else {
                    AmazonS3Builder::new()
                };
                b = b.with_url(bucket_url);
                for option in &self.options {
                    if let StoreOption::S3(k, v) = option {
                        b = b.with_config(*k, v);
                    }
                }
                if let Some(retry) = &self.retry {
                    b = b.with_retry(retry.clone());
                }
                Arc::new(b.build()?)
            }
            Cloud::Gcs => {
                let mut b = if self.from_env {
                    GoogleCloudStorageBuilder::from_env()
                } else {
                    GoogleCloudStorageBuilder::new()
                };
                b = b.with_url(bucket_url);
                for option in &self.options {
                    if let StoreOption::Gcs(k, v) = option {
                        b = b.with_config(*k, v);
                    }
                }
                if let Some(retry) = &self.retry {
                    b = b.with_retry(retry.clone());
                }
                Arc::new(b.build()?)
            }
            Cloud::Azure => {
                let mut b = if self.from_env {
                    MicrosoftAzureBuilder::from_env()
                } else {
                    MicrosoftAzureBuilder::new()
                };
                b = b.with_url(bucket_url);
                for option in &self.options {
                    if let StoreOption::Azure(k, v) = option {
                        b = b.with_config(*k, v);
                    }
                }
                if let Some(retry) = &self.retry {
                    b = b.with_retry(retry.clone());
                }
                Arc::new(b.build()?)
            }
        })
    }
}

/// `AmazonS3Builder::from_env`, plus TensorFlow's `S3_ENDPOINT` /
/// `S3_USE_HTTPS` when no `AWS_ENDPOINT*` variable is set, so a TensorFlow
/// setup pointing at MinIO keeps working unchanged.
fn s3_builder_from_env() -> AmazonS3Builder {
    let mut builder = AmazonS3Builder::from_env();
    let aws_endpoint = ["AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_ENDPOINT_URL_S3"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if !aws_endpoint && let Ok(endpoint) = std::env::var("S3_ENDPOINT") {
        let https = std::env::var("S3_USE_HTTPS").map_or(true, |v| v != "0");
        let endpoint = if endpoint.contains("://") {
            endpoint
        } else if https {
            format!("https://{endpoint}")
        } else {
            format!("http://{endpoint}")
        };
        if endpoint.starts_with("http://") {
            builder = builder.with_allow_http(true);
        }
        builder = builder.with_endpoint(endpoint);
    }
    builder
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::fs::scheme;

    #[test]
    fn object_store_urls_dispatch_here() {
        for url in [
            "s3://b/k",
            "s3a://b/k",
            "gs://b/k",
            "az://c/k",
            "abfss://c@a.dfs.core.windows.net/k",
        ] {
            assert!(is_object_store_scheme(scheme(url).unwrap()), "{url}");
        }
        assert!(!is_object_store_scheme("hdfs"));
        assert!(!is_object_store_scheme("file"));
    }
}
