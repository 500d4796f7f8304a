"""`tfdata.errors` mirrors `tf.errors`, and errors reach the caller as
TensorFlow 2.21 raises them (classes and wording compared with real
TensorFlow where it raises them before reading any data)."""

from __future__ import annotations

import json
import pickle
import socket
import time

import pytest

import tfdata
from tfdata import errors
from tfdata.experimental import service

from conftest import run_python, tensorflow_python

CLASSES = {
    "CancelledError": "CANCELLED",
    "UnknownError": "UNKNOWN",
    "InvalidArgumentError": "INVALID_ARGUMENT",
    "DeadlineExceededError": "DEADLINE_EXCEEDED",
    "NotFoundError": "NOT_FOUND",
    "AlreadyExistsError": "ALREADY_EXISTS",
    "PermissionDeniedError": "PERMISSION_DENIED",
    "UnauthenticatedError": "UNAUTHENTICATED",
    "ResourceExhaustedError": "RESOURCE_EXHAUSTED",
    "FailedPreconditionError": "FAILED_PRECONDITION",
    "AbortedError": "ABORTED",
    "OutOfRangeError": "OUT_OF_RANGE",
    "UnimplementedError": "UNIMPLEMENTED",
    "InternalError": "INTERNAL",
    "UnavailableError": "UNAVAILABLE",
    "DataLossError": "DATA_LOSS",
}

# TensorFlow's names and codes, printed by TensorFlow itself.
TF_ERRORS_SCRIPT = """
import json, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
out = {"constants": {}, "classes": {}}
for name in dir(tf.errors):
    value = getattr(tf.errors, name)
    if isinstance(value, int) and name.isupper():
        out["constants"][name] = value
    elif isinstance(value, type) and issubclass(value, tf.errors.OpError) and value is not tf.errors.OpError:
        out["classes"][name] = value(None, None, "m").error_code
print(json.dumps(out))
"""


def _tf_json(code: str) -> dict:
    result = run_python(code, python=tensorflow_python())
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tf_errors():
    return _tf_json(TF_ERRORS_SCRIPT)


def test_names_and_codes_match_tensorflow(tf_errors):
    assert set(tf_errors["classes"]) == set(CLASSES)
    for name, code in tf_errors["constants"].items():
        assert getattr(errors, name) == code, name
    for name, code in tf_errors["classes"].items():
        cls = getattr(errors, name)
        e = cls(None, None, "m")
        assert e.error_code == e.code == code, name


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_class_code_message_and_inheritance(name):
    cls = getattr(errors, name)
    code = getattr(errors, CLASSES[name])
    assert issubclass(cls, errors.OpError) and issubclass(cls, Exception)
    assert cls.__module__ == "tfdata.errors" and cls.__name__ == name
    e = cls(None, None, "what went wrong")
    assert e.code == e.error_code == code
    assert e.message == str(e) == "what went wrong"
    assert e.node_def is None and e.op is None and e.experimental_payloads == {}
    assert errors.exception_type_from_error_code(code) is cls
    assert errors.error_code_from_exception_type(cls) == code
    with pytest.raises(errors.OpError):
        raise e


def test_op_error_itself():
    e = errors.OpError(None, None, "base", errors.ABORTED, {"k": b"v"})
    assert (e.code, e.error_code, e.message, str(e)) == (errors.ABORTED, errors.ABORTED, "base", "base")
    assert e.experimental_payloads == {"k": b"v"}
    assert errors.OK == 0 and errors.UNAUTHENTICATED == 16


def test_unknown_codes_and_classes_like_tensorflow():
    # TensorFlow: a KeyError for a code with no class (OK included) ...
    for code in (errors.OK, 17, -1):
        with pytest.raises(KeyError):
            errors.exception_type_from_error_code(code)
    # ... and a warning for a class with no code.
    with pytest.warns(UserWarning, match="Unknown class exception"):
        assert errors.error_code_from_exception_type(ValueError) == errors.UNKNOWN


@pytest.mark.parametrize("name", ["OpError", *sorted(CLASSES)])
def test_pickle_round_trip(name):
    cls = getattr(errors, name)
    e = cls(None, None, "pickled", errors.INTERNAL) if cls is errors.OpError else cls(None, None, "pickled")
    e.note = "extra attribute"
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        r = pickle.loads(pickle.dumps(e, protocol=protocol))
        assert type(r) is cls
        assert (r.message, str(r), r.code, r.args) == (e.message, str(e), e.code, e.args)
        assert r.note == "extra attribute"


def test_pickle_of_raised_service_error():
    """An error raised by the engine (built in Rust) pickles too, as a
    DataLoader worker sends it to the main process."""
    with pytest.raises(errors.InvalidArgumentError) as info:
        tfdata.Dataset.range(3).batch(0)
    r = pickle.loads(pickle.dumps(info.value))
    assert type(r) is errors.InvalidArgumentError
    assert r.message == info.value.message and r.code == errors.INVALID_ARGUMENT


# ---- Errors observable through the API ----


def _busy_port():
    sock = socket.socket()
    sock.bind(("", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


TF_PORT_IN_USE = """
import json, os, socket
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
service = tf.data.experimental.service
sock = socket.socket(); sock.bind(("", 0)); sock.listen(); port = sock.getsockname()[1]
out = {}
for kind, make in [
    ("dispatcher", lambda: service.DispatchServer(service.DispatcherConfig(port=port))),
    ("worker", lambda: service.WorkerServer(service.WorkerConfig("localhost:1", port=port))),
]:
    try:
        make()
        out[kind] = None
    except Exception as e:
        out[kind] = [[c.__name__ for c in type(e).__mro__], str(e)]
print(json.dumps(out))
"""


def test_port_in_use_raises_like_tensorflow():
    tf = _tf_json(TF_PORT_IN_USE)
    # TensorFlow 2.21 raises RuntimeError("Could not start gRPC server").
    assert tf["dispatcher"][0][0] == tf["worker"][0][0] == "RuntimeError"
    assert tf["dispatcher"][1] == tf["worker"][1] == "Could not start gRPC server"
    sock, port = _busy_port()
    with sock:
        for make in (
            lambda: service.DispatchServer(service.DispatcherConfig(port=port)),
            lambda: service.WorkerServer(service.WorkerConfig("localhost:1", port=port)),
        ):
            with pytest.raises(errors.UnavailableError) as info:
                make()
            assert isinstance(info.value, RuntimeError)  # what TensorFlow code catches
            assert info.value.code == errors.UNAVAILABLE
            assert info.value.message.startswith("Could not start gRPC server")
            assert str(port) in info.value.message
            pickle.loads(pickle.dumps(info.value))


def test_unreachable_dispatcher_is_unavailable_within_timeout():
    sock = socket.socket()
    sock.bind(("localhost", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    start = time.monotonic()
    with pytest.raises(errors.UnavailableError) as info:
        ds = tfdata.Dataset.range(3).apply(
            service.distribute("parallel_epochs", f"grpc://localhost:{port}", dispatcher_timeout_ms=1000)
        )
        list(ds)
    assert time.monotonic() - start < 5
    assert f"localhost:{port}" in info.value.message
    assert info.value.code == errors.UNAVAILABLE


def test_unknown_dataset_id_is_not_found(dispatcher):
    spec = tfdata.Dataset.range(3).element_spec
    with pytest.raises(errors.NotFoundError) as info:
        list(service.from_dataset_id("parallel_epochs", dispatcher.target, "12345", element_spec=spec))
    assert "12345" in info.value.message
    # Without an element_spec TensorFlow raises ValueError("Failed to fetch
    # element spec ..."); ours is both.
    with pytest.raises(errors.NotFoundError) as info:
        service.from_dataset_id("parallel_epochs", dispatcher.target, "12345")
    assert isinstance(info.value, ValueError)
    assert info.value.message.startswith("Failed to fetch element spec for dataset id 12345 from tf.data service.")


@pytest.mark.parametrize(
    "make",
    [
        lambda: tfdata.Dataset.range(3).batch(0),
        lambda: tfdata.Dataset.range(3).shard(0, 0),
        lambda: tfdata.Dataset.range(3).shard(2, 2),
        lambda: tfdata.Dataset.range(3).shuffle(0),
        lambda: tfdata.Dataset.range(0, 3, 0),
    ],
    ids=["batch0", "shard0", "shard_index", "shuffle0", "range_step0"],
)
def test_invalid_pipeline_arguments_raise_at_construction(make):
    with pytest.raises(errors.InvalidArgumentError):
        make()


def test_python_function_error_in_map():
    def bad(x):
        if x == 1:
            raise KeyError("boom")
        return x

    it = tfdata.Dataset.range(3).map(bad).as_numpy_iterator()
    assert next(it) == 0
    with pytest.raises(errors.InvalidArgumentError) as info:
        next(it)
    assert "KeyError" in info.value.message and "boom" in info.value.message
    assert isinstance(info.value.__cause__, KeyError)
    assert info.value.__cause__.args == ("boom",)


# ---- ValueError / TypeError wording, compared with TensorFlow's ----

# Each case runs as an expression with S = the service module, ds =
# Dataset.range(3) and T = a live dispatcher's target, under TensorFlow and
# under tfdata; it raises before any data is read.
CASES = {
    "mode": "S.distribute('invalid', T)",
    "mode_none": "S.distribute(None, T)",
    "service_type": "ds.apply(S.distribute('parallel_epochs', 1))",
    "service_empty": "ds.apply(S.distribute('parallel_epochs', ''))",
    "service_twice": "ds.apply(S.distribute('parallel_epochs', 'grpc://a://b'))",
    "job_name_type": "S.distribute('parallel_epochs', T, job_name=1)",
    "job_name_empty": "S.distribute('parallel_epochs', T, job_name='')",
    "num_consumers_no_job": "ds.apply(S.distribute('parallel_epochs', T, consumer_index=0, num_consumers=2))",
    "compression": "S.distribute('parallel_epochs', T, compression='bogus')",
    "ctc_empty": "S.CrossTrainerCache('')",
    "ctc_none": "S.CrossTrainerCache(None)",
    "fdi_mode": "S.from_dataset_id('bogus', T, '1', element_spec=ds.element_spec)",
    "fdi_service_type": "S.from_dataset_id('parallel_epochs', 5, '1', element_spec=ds.element_spec)",
    "fdi_service_empty": "S.from_dataset_id('parallel_epochs', '', '1', element_spec=ds.element_spec)",
    "fdi_service_twice": "S.from_dataset_id('parallel_epochs', 'a://b://c', '1', element_spec=ds.element_spec)",
    "fdi_job_name_type": "S.from_dataset_id('parallel_epochs', T, '1', element_spec=ds.element_spec, job_name=3)",
    "fdi_job_name_empty": "S.from_dataset_id('parallel_epochs', T, '1', element_spec=ds.element_spec, job_name='')",
    "fdi_num_consumers_no_job": (
        "S.from_dataset_id('parallel_epochs', T, '1', element_spec=ds.element_spec, consumer_index=0, num_consumers=2)"
    ),
    "reg_service_type": "S.register_dataset(1, ds)",
    "reg_service_empty": "S.register_dataset('', ds)",
    "reg_service_twice": "S.register_dataset('a://b://c', ds)",
    "reg_compression": "S.register_dataset(T, ds, compression='zip')",
    "dispatcher_ft_without_work_dir": "S.DispatchServer(S.DispatcherConfig(fault_tolerant_mode=True))",
    "worker_without_dispatcher": "S.WorkerServer(S.WorkerConfig(None))",
    # Only checked at apply time in TensorFlow: building the transformation succeeds.
    "service_type_deferred": "S.distribute('parallel_epochs', 1) and None",
    "service_empty_deferred": "S.distribute('parallel_epochs', '') and None",
}

CASES_SCRIPT = """
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
CASES = json.loads(sys.argv[1]) if len(sys.argv) > 1 else json.loads(os.environ["CASES"])
if os.environ.get("USE_TF"):
    import tensorflow as tf
    S = tf.data.experimental.service
    ds = tf.data.Dataset.range(3)
else:
    import tfdata
    from tfdata.experimental import service as S
    ds = tfdata.Dataset.range(3)
d = S.DispatchServer()
T = d.target
out = {}
for key, expr in CASES.items():
    try:
        eval(expr)
        out[key] = None
    except Exception as e:
        out[key] = [type(e).__name__, str(e), [c.__name__ for c in type(e).__mro__]]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def tf_cases():
    result = run_python(CASES_SCRIPT, python=tensorflow_python(), env={"USE_TF": "1", "CASES": json.dumps(CASES)})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def our_cases():
    result = run_python(CASES_SCRIPT, env={"CASES": json.dumps(CASES)})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("key", sorted(CASES))
def test_argument_errors_match_tensorflow(key, tf_cases, our_cases):
    ours, tf = our_cases[key], tf_cases[key]
    if key.endswith("_deferred"):
        assert tf is None and ours is None
        return
    assert tf is not None, f"TensorFlow raised nothing for {CASES[key]}"
    assert tf[0] in ("ValueError", "TypeError")
    assert ours is not None, f"tfdata raised nothing for {CASES[key]}"
    assert ours[0] == tf[0]
    assert ours[1] == tf[1]


def test_worker_dispatcher_address_type_is_type_error():
    # TensorFlow raises TypeError("bad argument type for built-in operation")
    # from its C++ binding; ours says which argument.
    with pytest.raises(TypeError, match="dispatcher_address"):
        service.WorkerServer(service.WorkerConfig(5))


@pytest.mark.parametrize(
    "kwargs",
    [{"job_name": "j", "consumer_index": 0}, {"job_name": "j", "num_consumers": 2}],
    ids=["consumer_index_only", "num_consumers_only"],
)
def test_consumer_index_and_num_consumers_together(kwargs, dispatcher):
    """TensorFlow 2.21 means to reject one without the other but its check
    (`consumer_index is None != num_consumers is None`, a chained comparison)
    never fires; tfdata rejects it with the message TensorFlow's check has."""
    with pytest.raises(ValueError, match=r"Must either set both `consumer_index` and `num_consumers`, or neither\."):
        tfdata.Dataset.range(3).apply(service.distribute("parallel_epochs", dispatcher.target, **kwargs))
    with pytest.raises(ValueError, match="Must either set both"):
        service.from_dataset_id(
            "parallel_epochs", dispatcher.target, "1", element_spec=tfdata.Dataset.range(3).element_spec, **kwargs
        )


def test_cross_trainer_cache_must_be_one():
    with pytest.raises(TypeError, match="cross_trainer_cache"):
        tfdata.Dataset.range(3).apply(
            service.distribute("parallel_epochs", "grpc://localhost:1", job_name="j", cross_trainer_cache="t")
        )
