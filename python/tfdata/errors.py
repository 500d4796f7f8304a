"""Exceptions raised by tfdata, named and numbered like ``tf.errors``.

Every error from the service or the engine is an :class:`OpError` subclass
chosen by its status code (TensorFlow's codes are gRPC's), with
``.error_code`` (also ``.code``) and ``.message``, so
``except tf.errors.UnavailableError`` becomes
``except tfdata.errors.UnavailableError``. They pickle (a PyTorch
DataLoader worker sends its exceptions to the main process).
"""

from __future__ import annotations

import warnings

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """The base class of tfdata's errors (TensorFlow's ``tf.errors.OpError``).

    Args:
        node_def: Always ``None`` in tfdata (TensorFlow's graph node).
        op: Always ``None`` in tfdata (TensorFlow's operation).
        message: What went wrong.
        error_code: The status code, one of the constants of this module.
    """

    def __init__(self, node_def, op, message, error_code=UNKNOWN, *args):
        super().__init__(message)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code
        self._experimental_payloads = args[0] if args and args[0] is not None else {}

    @property
    def message(self) -> str:
        """The error message."""
        return self._message

    @property
    def error_code(self) -> int:
        """The status code (for example ``tfdata.errors.UNAVAILABLE``), as
        TensorFlow's ``OpError.error_code``."""
        return self._error_code

    @property
    def code(self) -> int:
        """The status code; the same as :attr:`error_code`."""
        return self._error_code

    @property
    def node_def(self):
        """Always ``None``: tfdata has no graph nodes."""
        return self._node_def

    @property
    def op(self):
        """Always ``None``: tfdata has no graph operations."""
        return self._op

    @property
    def experimental_payloads(self) -> dict:
        """The status payloads (TensorFlow's); empty for tfdata's own errors."""
        return self._experimental_payloads

    def __str__(self) -> str:
        return self._message

    def __reduce__(self):
        # Rebuilt without calling the class's own __init__, whose signature
        # subclasses choose; the instance dict (set attributes) comes along.
        state = {k: v for k, v in self.__dict__.items() if k not in _FIELDS}
        return (
            _rebuild,
            (type(self), self._node_def, self._op, self._message, self._error_code, self._experimental_payloads),
            state or None,
        )


_FIELDS = ("_node_def", "_op", "_message", "_error_code", "_experimental_payloads")


def _rebuild(cls, node_def, op, message, error_code, payloads):
    """Unpickles an :class:`OpError` of class ``cls``."""
    error = cls.__new__(cls)
    OpError.__init__(error, node_def, op, message, error_code, payloads)
    return error


def _subclass(name: str, code: int, doc: str) -> type[OpError]:
    def __init__(self, node_def, op, message, *args):
        OpError.__init__(self, node_def, op, message, code, *args)

    return type(name, (OpError,), {"__init__": __init__, "__doc__": doc, "__module__": __name__})


CancelledError = _subclass("CancelledError", CANCELLED, "An operation was cancelled.")
UnknownError = _subclass("UnknownError", UNKNOWN, "An unknown error.")
InvalidArgumentError = _subclass(
    "InvalidArgumentError", INVALID_ARGUMENT, "An argument (or a pipeline) is invalid."
)
DeadlineExceededError = _subclass(
    "DeadlineExceededError", DEADLINE_EXCEEDED, "A deadline expired before the operation finished."
)
NotFoundError = _subclass("NotFoundError", NOT_FOUND, "Something requested (a dataset, a file) was not found.")
AlreadyExistsError = _subclass("AlreadyExistsError", ALREADY_EXISTS, "Something to create already exists.")
PermissionDeniedError = _subclass("PermissionDeniedError", PERMISSION_DENIED, "The caller may not do this.")
UnauthenticatedError = _subclass("UnauthenticatedError", UNAUTHENTICATED, "The request has no valid credentials.")
ResourceExhaustedError = _subclass("ResourceExhaustedError", RESOURCE_EXHAUSTED, "A resource ran out.")
FailedPreconditionError = _subclass(
    "FailedPreconditionError", FAILED_PRECONDITION, "The system is not in a state to do this."
)
AbortedError = _subclass("AbortedError", ABORTED, "The operation was aborted.")
OutOfRangeError = _subclass("OutOfRangeError", OUT_OF_RANGE, "The operation went past the valid range.")
UnimplementedError = _subclass("UnimplementedError", UNIMPLEMENTED, "The operation is not implemented.")
InternalError = _subclass("InternalError", INTERNAL, "An internal invariant broke.")
UnavailableError = _subclass("UnavailableError", UNAVAILABLE, "A server is unavailable (retrying may help).")
DataLossError = _subclass("DataLossError", DATA_LOSS, "Data was lost or corrupted (a bad file or journal).")

_CODE_TO_EXCEPTION_CLASS = {
    CANCELLED: CancelledError,
    UNKNOWN: UnknownError,
    INVALID_ARGUMENT: InvalidArgumentError,
    DEADLINE_EXCEEDED: DeadlineExceededError,
    NOT_FOUND: NotFoundError,
    ALREADY_EXISTS: AlreadyExistsError,
    PERMISSION_DENIED: PermissionDeniedError,
    UNAUTHENTICATED: UnauthenticatedError,
    RESOURCE_EXHAUSTED: ResourceExhaustedError,
    FAILED_PRECONDITION: FailedPreconditionError,
    ABORTED: AbortedError,
    OUT_OF_RANGE: OutOfRangeError,
    UNIMPLEMENTED: UnimplementedError,
    INTERNAL: InternalError,
    UNAVAILABLE: UnavailableError,
    DATA_LOSS: DataLossError,
}


_EXCEPTION_CLASS_TO_CODE = {cls: code for code, cls in _CODE_TO_EXCEPTION_CLASS.items()}


def exception_type_from_error_code(error_code: int) -> type[OpError]:
    """The exception class for a status code; ``KeyError`` for a code that
    names none (``OK`` included), as in TensorFlow."""
    return _CODE_TO_EXCEPTION_CLASS[error_code]


def error_code_from_exception_type(cls: type) -> int:
    """The status code of an exception class; ``UNKNOWN`` (with a warning,
    as TensorFlow warns) for any other class."""
    try:
        return _EXCEPTION_CLASS_TO_CODE[cls]
    except (KeyError, TypeError):
        warnings.warn("Unknown class exception")
        return UNKNOWN


__all__ = [
    "OpError",
    *(c.__name__ for c in _CODE_TO_EXCEPTION_CLASS.values()),
    "exception_type_from_error_code",
    "error_code_from_exception_type",
]
