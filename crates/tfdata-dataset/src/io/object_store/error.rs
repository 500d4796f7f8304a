//! Object-store failures, typed where this module branches on them (a
//! missing bucket checks as "does not exist"; refused credentials are a
//! `PermissionDenied` I/O error), with the `object_store` error kept as the
//! [`source`](std::error::Error::source). They become tfdata's [`Error`] at
//! the [`FileSystem`](crate::io::FileSystem) boundary, with the messages and
//! status codes callers see: the request and URL, the store's error and its
//! causes, and for credential problems the variables to check.

use std::fmt;
use std::io;

use tfdata_core::Error;

use super::clouds::Cloud;
use super::location::Location;
use crate::io::fs::scheme;

/// Why a request failed, as far as tfdata's callers care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// The object does not exist.
    NotFound,
    /// The bucket does not exist (a listing's 404).
    NoSuchBucket {
        /// `scheme://bucket`.
        bucket_url: String,
    },
    /// No credentials could be found or fetched: with none configured, the
    /// SDK chain ends at the cloud's metadata server, which off-cloud is
    /// unreachable or refuses. A configuration problem, not a transient one.
    NoCredentials,
    /// The store refused the credentials (HTTP 401 or 403).
    AccessDenied,
    /// The object changed while it was being read: its ETag no longer
    /// matches the one the read is pinned to.
    ObjectChanged,
    /// A conditional write found the object already there.
    AlreadyExists,
    /// The store does not support the request.
    Unsupported,
    /// The request cannot be expressed (a bad key, an unknown configuration
    /// key).
    InvalidRequest,
    /// A network or server failure that outlasted `object_store`'s own
    /// retries; retrying later may succeed.
    Unavailable,
}

impl Failure {
    /// Classifies an `object_store` error. Its HTTP and credential errors
    /// are private types that it reports as [`::object_store::Error::Generic`],
    /// so for those the formatted causes are all there is to go by.
    fn of(err: &::object_store::Error) -> Self {
        use ::object_store::Error as E;
        match err {
            E::Generic { .. } if is_credential_failure(&message_with_causes(err)) => {
                Self::NoCredentials
            }
            // Listings report every HTTP failure as generic: recover refusals.
            E::Generic { .. } if is_status(err, 401) || is_status(err, 403) => Self::AccessDenied,
            E::NotFound { .. } => Self::NotFound,
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => Self::AccessDenied,
            E::Precondition { .. } => Self::ObjectChanged,
            E::AlreadyExists { .. } => Self::AlreadyExists,
            E::NotSupported { .. } | E::NotImplemented { .. } => Self::Unsupported,
            E::InvalidPath { .. } | E::UnknownConfigurationKey { .. } => Self::InvalidRequest,
            _ => Self::Unavailable,
        }
    }

    /// Credential problems, which an `io::Error` reports as
    /// [`io::ErrorKind::PermissionDenied`].
    fn is_credential_problem(&self) -> bool {
        matches!(self, Self::NoCredentials | Self::AccessDenied)
    }
}

/// An `object_store` request that failed: what was being done (`action`,
/// e.g. "reading") to which URL, why, and the store's error as the source.
#[derive(Debug)]
pub(super) struct RequestError {
    action: String,
    url: String,
    failure: Failure,
    source: ::object_store::Error,
}

impl RequestError {
    /// The failure `source` of `action`-ing `url`.
    pub(super) fn new(action: &str, url: &str, source: ::object_store::Error) -> Self {
        Self {
            action: action.to_string(),
            url: url.to_string(),
            failure: Failure::of(&source),
            source,
        }
    }

    /// [`RequestError::new`] for a listing, where `object_store` reports a
    /// missing bucket as "not found" or as a generic 404: that is
    /// [`Failure::NoSuchBucket`], since a typo in a bucket name is far
    /// likelier than a transient failure and must not be retried (or look
    /// like an empty directory).
    pub(super) fn of_listing(action: &str, url: &str, source: ::object_store::Error) -> Self {
        let missing_bucket = matches!(source, ::object_store::Error::NotFound { .. })
            || (matches!(source, ::object_store::Error::Generic { .. }) && is_status(&source, 404));
        let mut err = Self::new(action, url, source);
        if missing_bucket && let Ok(location) = Location::parse(url) {
            err.failure = Failure::NoSuchBucket {
                bucket_url: location.bucket_url(),
            };
        }
        err
    }

    pub(super) fn failure(&self) -> &Failure {
        &self.failure
    }

    /// "; check <the cloud's configuration variables>", for credential errors.
    fn configuration_hint(&self) -> String {
        scheme(&self.url)
            .and_then(Cloud::of)
            .map_or(String::new(), |c| format!("; check {}", c.env_hint()))
    }
}

/// The request and what went wrong, without the source (see
/// [`std::error::Error::source`]).
impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { action, url, .. } = self;
        match &self.failure {
            Failure::NotFound => write!(f, "{action} {url}: not found"),
            Failure::NoSuchBucket { bucket_url } => {
                write!(f, "{action} {url}: bucket {bucket_url} not found")
            }
            Failure::NoCredentials => write!(f, "{action} {url}: no credentials"),
            Failure::AccessDenied => write!(f, "{action} {url}: access denied"),
            Failure::ObjectChanged => write!(
                f,
                "{action} {url}: the object changed while it was being read \
                 (its ETag no longer matches)"
            ),
            Failure::AlreadyExists => write!(f, "{action} {url}: already exists"),
            Failure::Unsupported => write!(f, "{action} {url}: not supported"),
            Failure::InvalidRequest => write!(f, "{action} {url}: invalid request"),
            Failure::Unavailable => write!(f, "{action} {url}: unavailable"),
        }
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// tfdata's error for a failed request, naming the URL: missing objects
/// and buckets are [`Error::NotFound`], refused or missing credentials
/// [`Error::FailedPrecondition`] with a configuration hint, and network or
/// server failures [`Error::Unavailable`], which callers may retry.
/// `tfdata_core::Error` has no variant with a source, so the source chain
/// is flattened into the message here, the edge of this module.
impl From<RequestError> for Error {
    fn from(err: RequestError) -> Self {
        let RequestError {
            action,
            url,
            failure,
            source,
        } = &err;
        let causes = message_with_causes(source);
        match failure {
            Failure::NotFound => Error::NotFound {
                what: "file",
                id: url.clone(),
            },
            Failure::NoSuchBucket { bucket_url } => Error::NotFound {
                what: "bucket",
                id: bucket_url.clone(),
            },
            Failure::NoCredentials => Error::FailedPrecondition(format!(
                "{action} {url}: no credentials: {causes}{}",
                err.configuration_hint()
            )),
            Failure::AccessDenied => Error::FailedPrecondition(format!(
                "{action} {url}: access denied: {causes}{}",
                err.configuration_hint()
            )),
            Failure::ObjectChanged => Error::FailedPrecondition(format!(
                "{action} {url}: the object changed while it was being read \
                 (its ETag no longer matches): {causes}"
            )),
            Failure::AlreadyExists => {
                Error::FailedPrecondition(format!("{action} {url}: {causes}"))
            }
            Failure::Unsupported => Error::Unimplemented(format!("{action} {url}: {causes}")),
            Failure::InvalidRequest => Error::InvalidArgument(format!("{action} {url}: {causes}")),
            Failure::Unavailable => Error::Unavailable(format!("{action} {url}: {causes}")),
        }
    }
}

/// What reading or writing an object fails with: a failed request, or
/// anything else (the I/O runtime, a writer used after its upload, a short
/// read), already a tfdata error.
#[derive(Debug)]
pub(super) enum StoreError {
    /// Boxed: a request error is large, and this is returned on every read.
    Request(Box<RequestError>),
    Other(Error),
}

impl From<RequestError> for StoreError {
    fn from(err: RequestError) -> Self {
        Self::Request(Box::new(err))
    }
}

impl From<Error> for StoreError {
    fn from(err: Error) -> Self {
        Self::Other(err)
    }
}

impl From<StoreError> for Error {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Request(err) => (*err).into(),
            StoreError::Other(err) => err,
        }
    }
}

impl StoreError {
    /// The `io::Error` a `Read`/`Write` impl must return: tfdata's error
    /// (whose message names the URL) inside, so callers that unwrap it get
    /// it back, and a matching kind. Kinds the decompressors use for corrupt
    /// input (`InvalidData`, `UnexpectedEof`) are avoided so a network
    /// failure is not mistaken for corruption.
    pub(super) fn into_io_error(self) -> io::Error {
        let kind = match &self {
            StoreError::Request(err) => match err.failure() {
                Failure::NotFound | Failure::NoSuchBucket { .. } => io::ErrorKind::NotFound,
                failure if failure.is_credential_problem() => io::ErrorKind::PermissionDenied,
                Failure::Unavailable => io::ErrorKind::ConnectionAborted,
                _ => io::ErrorKind::Other,
            },
            StoreError::Other(_) => io::ErrorKind::Other,
        };
        io::Error::new(kind, Error::from(self))
    }
}

/// The error and its causes, `: `-joined, skipping causes already in the
/// text (`object_store` errors often repeat their source).
fn message_with_causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Whether an error's causes say fetching credentials failed: a token
/// request, or the instance metadata endpoint the credential chains fall
/// back to. (`object_store` reports both as generic errors of private types,
/// so their text is all there is.)
fn is_credential_failure(causes: &str) -> bool {
    ["token request", "169.254.169.254", "credential"]
        .iter()
        .any(|needle| causes.contains(needle))
}

/// Whether `err` is an HTTP error with `status`. `object_store` keeps its
/// HTTP error type (`RetryError`, which has a `status()`) private, so this
/// reads the message it formats ("... status code: 404 Not Found ...").
fn is_status(err: &::object_store::Error, status: u16) -> bool {
    message_with_causes(err).contains(&format!("status code: {status} "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_failures_are_configuration_errors() {
        let token = || ::object_store::Error::Generic {
            store: "GCS",
            source: "Error performing token request: 403 Forbidden".into(),
        };
        let request = RequestError::new("reading", "gs://b/x", token());
        assert_eq!(request.failure(), &Failure::NoCredentials);
        // The source chain is kept until the error leaves this module.
        assert!(std::error::Error::source(&request).is_some());
        let err = Error::from(request);
        assert!(matches!(err, Error::FailedPrecondition(_)), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("gs://b/x") && msg.contains("no credentials"),
            "{msg}"
        );
        assert!(msg.contains("GOOGLE_APPLICATION_CREDENTIALS"), "{msg}");
        let io =
            StoreError::from(RequestError::new("reading", "gs://b/x", token())).into_io_error();
        assert_eq!(io.kind(), io::ErrorKind::PermissionDenied);

        let network = ::object_store::Error::Generic {
            store: "S3",
            source: "Error performing GET http://h/b/x: connection reset".into(),
        };
        let err = Error::from(RequestError::new("reading", "s3://b/x", network));
        assert!(matches!(err, Error::Unavailable(_)), "{err}");
        assert!(err.to_string().contains("s3://b/x"), "{err}");
    }

    #[test]
    fn the_kind_of_io_error_follows_the_failure_not_the_text() {
        // A URL that reads like a credential problem is not one.
        let url = "s3://b/access denied/no credentials";
        let reset = ::object_store::Error::Generic {
            store: "S3",
            source: "connection reset".into(),
        };
        let io = StoreError::from(RequestError::new("reading", url, reset)).into_io_error();
        assert_eq!(io.kind(), io::ErrorKind::ConnectionAborted);
        let other = StoreError::from(Error::FailedPrecondition(format!("writing {url}")));
        assert_eq!(other.into_io_error().kind(), io::ErrorKind::Other);
    }

    #[test]
    fn missing_buckets_are_found_in_listings() {
        let missing = |source: &str| ::object_store::Error::Generic {
            store: "S3",
            source: source.to_string().into(),
        };
        let err = RequestError::of_listing(
            "listing",
            "s3://nope/dir",
            missing("Server returned non-2xx status code: 404 Not Found: NoSuchBucket"),
        );
        assert_eq!(
            err.failure(),
            &Failure::NoSuchBucket {
                bucket_url: "s3://nope".into()
            }
        );
        let err = Error::from(err);
        assert!(
            matches!(&err, Error::NotFound { what: "bucket", id } if id == "s3://nope"),
            "{err}"
        );
    }
}
