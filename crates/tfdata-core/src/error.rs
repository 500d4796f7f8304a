//! tfdata's error type: the counterpart of `tf.errors.OpError`.
//!
//! Every error carries a gRPC status code (TensorFlow's status codes are the
//! gRPC codes), so it can cross the wire and come back as the same kind of
//! error. One enum serves every crate because almost every error may end up in
//! an RPC response; variants are structured where callers act on the fields.

use std::sync::Arc;
use std::time::Duration;

use tonic::Code;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A config value that can never work; raised by constructors.
    #[error("invalid config: {field}: {reason}")]
    InvalidConfig { field: &'static str, reason: String },

    /// A server could not listen on its port.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: String,
        #[source]
        source: std::io::Error,
    },

    /// The peer speaks another tf.data service protocol version.
    #[error(
        "version mismatch with tf.data service server at {address}: server version {server}, \
         client version {client}; run the same protocol version on both sides"
    )]
    VersionMismatch {
        address: String,
        server: i64,
        client: i64,
    },

    /// A peer could not be reached within the retry deadline.
    #[error("could not reach {what} at {address} within {after:?}: {cause}")]
    Unreachable {
        what: &'static str,
        address: String,
        after: Duration,
        cause: String,
    },

    /// An id that names nothing the server knows.
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },

    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    #[error("failed precondition: {0}")]
    FailedPrecondition(String),

    /// Not ready yet (a server starting, a task not yet delivered): retry.
    #[error("unavailable: {0}")]
    Unavailable(String),

    #[error("cancelled: {0}")]
    Cancelled(String),

    /// What was to be created exists (a snapshot path, for example).
    #[error("already exists: {0}")]
    AlreadyExists(String),

    #[error("unimplemented: {0}")]
    Unimplemented(String),

    #[error("internal: {0}")]
    Internal(String),

    /// Corrupt bytes on disk or on the wire, located as precisely as possible.
    #[error("data loss in {location}: {reason}")]
    DataLoss { location: String, reason: String },

    /// A registered user function failed or panicked. `code` is the status
    /// TensorFlow reports for it: the function's own error's code, as
    /// TensorFlow passes a function's status on (an `Unimplemented` kernel
    /// stays `Unimplemented`), InvalidArgument for a panic; see
    /// [`Error::user_function`].
    #[error("user function `{function}` failed: {message}")]
    UserFunction {
        function: String,
        message: String,
        code: Code,
    },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    /// An error status received from a peer.
    #[error("{message} (code {code:?})")]
    Remote { code: Code, message: String },

    /// `source`, reported further out: with what was being done when it
    /// happened (displayed "context: source"), or with no context, the same
    /// error handed to one more caller (a failed task answers every later
    /// read with the error it failed with; `Arc` because an error is not
    /// `Clone`). Keeps the code and retryability of its source.
    #[error("{}", with_context(context.as_deref(), source))]
    Context {
        context: Option<String>,
        #[source]
        source: Arc<Error>,
    },
}

fn with_context(context: Option<&str>, source: &Error) -> String {
    match context {
        Some(context) => format!("{context}: {source}"),
        None => source.to_string(),
    }
}

impl Error {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub fn not_found(what: &'static str, id: impl ToString) -> Self {
        Error::NotFound {
            what,
            id: id.to_string(),
        }
    }

    /// A user function's failure with `message`, reported with `code` where
    /// that code cannot be mistaken downstream: an `OutOfRange` (the end of
    /// a sequence to readers) and the transient codes (which clients retry)
    /// become InvalidArgument, the code TensorFlow's datasets give a
    /// function's `OutOfRange`; every other code is kept.
    pub fn user_function(
        function: impl Into<String>,
        message: impl Into<String>,
        code: Code,
    ) -> Error {
        let code = match code {
            Code::Ok | Code::OutOfRange => Code::InvalidArgument,
            c if is_retryable_code(c) => Code::InvalidArgument,
            c => c,
        };
        Error::UserFunction {
            function: function.into(),
            message: message.into(),
            code,
        }
    }

    /// Whether this is TensorFlow's `OutOfRange`: what a TensorFlow 1 map
    /// function raises to end its dataset early.
    pub fn is_out_of_range(&self) -> bool {
        self.code() == Code::OutOfRange
    }

    /// The gRPC (= TensorFlow) status code of this error.
    pub fn code(&self) -> Code {
        match self {
            Error::InvalidConfig { .. } | Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::Bind { .. } => Code::Unavailable,
            Error::VersionMismatch { .. } | Error::FailedPrecondition(_) => {
                Code::FailedPrecondition
            }
            Error::Unreachable { .. } => Code::DeadlineExceeded,
            Error::NotFound { .. } => Code::NotFound,
            Error::Unavailable(_) => Code::Unavailable,
            Error::Cancelled(_) => Code::Cancelled,
            Error::AlreadyExists(_) => Code::AlreadyExists,
            Error::Unimplemented(_) => Code::Unimplemented,
            Error::Internal(_) => Code::Internal,
            Error::DataLoss { .. } => Code::DataLoss,
            Error::UserFunction { code, .. } => *code,
            Error::Io { .. } => Code::Internal,
            Error::Remote { code, .. } => *code,
            Error::Context { source, .. } => source.code(),
        }
    }

    /// Whether retrying the same call may succeed. TensorFlow treats
    /// UNAVAILABLE, ABORTED and CANCELLED as transient (spec §4.1).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Unavailable(_) | Error::Cancelled(_) | Error::Bind { .. } => true,
            Error::Remote { code, .. } => is_retryable_code(*code),
            Error::Context { source, .. } => source.is_retryable(),
            Error::InvalidConfig { .. }
            | Error::VersionMismatch { .. }
            | Error::Unreachable { .. }
            | Error::NotFound { .. }
            | Error::InvalidArgument(_)
            | Error::FailedPrecondition(_)
            | Error::AlreadyExists(_)
            | Error::Unimplemented(_)
            | Error::Internal(_)
            | Error::DataLoss { .. }
            | Error::UserFunction { .. }
            | Error::Io { .. } => false,
        }
    }
}

/// TensorFlow's notion of a transient status (spec §4.1).
pub fn is_retryable_code(code: Code) -> bool {
    matches!(code, Code::Unavailable | Code::Aborted | Code::Cancelled)
}

/// The canonical upper-case name of a status code (`"INVALID_ARGUMENT"`),
/// as gRPC and absl's `StatusCodeToString` spell it: what TensorFlow writes
/// in a snapshot's `ERROR` file and what metrics label a code with (one of
/// 17, a bounded label set).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The status codes by number (`tensorflow.error.Code`, = gRPC's): 0 to 16.
const CODE_NUMBERS: std::ops::RangeInclusive<i32> = 0..=16;

/// The name of the status code numbered `code` (as a proto's `int32 code`
/// field holds it), if there is one.
pub fn code_name_of(code: i32) -> Option<&'static str> {
    CODE_NUMBERS
        .contains(&code)
        .then(|| code_name(Code::from_i32(code)))
}

/// The status code [`code_name`] calls `name`, if any.
pub fn code_named(name: &str) -> Option<Code> {
    CODE_NUMBERS
        .map(Code::from_i32)
        .find(|&code| code_name(code) == name)
}

/// TensorFlow truncates status messages longer than this.
const MAX_STATUS_MESSAGE_BYTES: usize = 3072;

/// The message a peer is sent for `err`.
fn status_message(err: &Error) -> String {
    match err {
        // Peers see the remote message as it was, not wrapped twice.
        Error::Remote { message, .. } => message.clone(),
        // The same error again: the same message.
        Error::Context {
            context: None,
            source,
        } => status_message(source),
        other => other.to_string(),
    }
}

impl From<Error> for tonic::Status {
    fn from(err: Error) -> Self {
        let code = err.code();
        let mut message = status_message(&err);
        if message.len() > MAX_STATUS_MESSAGE_BYTES {
            let mut cut = MAX_STATUS_MESSAGE_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push_str("... [truncated]");
        }
        tonic::Status::new(code, message)
    }
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Self {
        // A connection that died mid-call: gRPC C++ says "Stream removed"
        // (TensorFlow maps it to UNAVAILABLE so it is retried); tonic reports
        // UNKNOWN "transport error" / "h2 protocol error", or INTERNAL
        // "h2 protocol error" when a server shutting down resets the stream
        // with INTERNAL_ERROR (never a message our servers send). Same
        // treatment.
        let m = status.message();
        let dropped = m == "Stream removed"
            || (status.code() == Code::Unknown
                && (m.starts_with("transport error")
                    || m.starts_with("h2 protocol error")
                    || m.contains("connection reset")))
            || (status.code() == Code::Internal && m.starts_with("h2 protocol error"));
        let code = if dropped {
            Code::Unavailable
        } else {
            status.code()
        };
        Error::Remote {
            code,
            message: status.message().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_name_that_reads_back() {
        let names: std::collections::HashSet<_> =
            (0..17).map(|c| code_name(Code::from_i32(c))).collect();
        assert_eq!(names.len(), 17);
        assert_eq!(code_name(Code::Unavailable), "UNAVAILABLE");
        for c in 0..17 {
            let name = code_name_of(c).unwrap();
            assert_eq!(code_named(name), Some(Code::from_i32(c)), "{name}");
        }
        assert_eq!(code_name_of(3), Some("INVALID_ARGUMENT"));
        assert_eq!(code_name_of(17), None);
        assert_eq!(code_name_of(-1), None);
        assert_eq!(code_named("invalid_argument"), None);
    }

    #[test]
    fn status_round_trip_keeps_code_and_message() {
        let err = Error::not_found("dataset", "1234");
        let status: tonic::Status = err.into();
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(status.message(), "dataset 1234 not found");
        let back: Error = status.into();
        assert_eq!(back.code(), Code::NotFound);
        assert!(!back.is_retryable());
    }

    #[test]
    fn transient_codes_are_retryable() {
        for code in [Code::Unavailable, Code::Aborted, Code::Cancelled] {
            assert!(Error::from(tonic::Status::new(code, "x")).is_retryable());
        }
        for code in [Code::NotFound, Code::InvalidArgument, Code::Internal] {
            assert!(!Error::from(tonic::Status::new(code, "x")).is_retryable());
        }
        let removed: Error = tonic::Status::new(Code::Unknown, "Stream removed").into();
        assert!(removed.is_retryable());
        let reset: Error = tonic::Status::new(Code::Unknown, "transport error").into();
        assert!(reset.is_retryable());
        // A server shutting down resets in-flight streams with INTERNAL_ERROR.
        let shutdown = "h2 protocol error: http2 error (code Internal)";
        let shutdown: Error = tonic::Status::new(Code::Internal, shutdown).into();
        assert!(shutdown.is_retryable());
    }

    #[test]
    fn context_keeps_the_code_and_retryability_of_its_source() {
        let remote: Error = tonic::Status::new(Code::DataLoss, "bad chunk").into();
        let err = Error::Context {
            context: Some("reading task 4000".into()),
            source: Arc::new(remote),
        };
        assert_eq!(err.code(), Code::DataLoss);
        assert!(!err.is_retryable());
        assert_eq!(
            err.to_string(),
            "reading task 4000: bad chunk (code DataLoss)"
        );
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("bad chunk (code DataLoss)"));
        let status: tonic::Status = err.into();
        assert_eq!(status.code(), Code::DataLoss);
        assert_eq!(
            status.message(),
            "reading task 4000: bad chunk (code DataLoss)"
        );

        let transient = Error::Context {
            context: Some("x".into()),
            source: Arc::new(Error::Unavailable("starting".into())),
        };
        assert!(transient.is_retryable());
    }

    #[test]
    fn context_free_context_is_its_source_again() {
        let shared = Arc::new(Error::from(tonic::Status::new(Code::Internal, "boom")));
        let again = || Error::Context {
            context: None,
            source: Arc::clone(&shared),
        };
        assert_eq!(again().to_string(), shared.to_string());
        assert_eq!(again().code(), Code::Internal);
        // A peer gets the remote message as it was, each time.
        let status: tonic::Status = again().into();
        assert_eq!(status.message(), "boom");
        let status: tonic::Status = again().into();
        assert_eq!(status.message(), "boom");
    }

    #[test]
    fn long_messages_are_truncated_like_tensorflow() {
        let status: tonic::Status = Error::Internal("é".repeat(4000)).into();
        assert!(status.message().ends_with("... [truncated]"));
        assert!(status.message().len() <= MAX_STATUS_MESSAGE_BYTES + 20);
    }
}
