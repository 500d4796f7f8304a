import sys, re
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

RUST = {np.int32:'i32', np.int64:'i64', np.float32:'f32', np.float64:'f64', np.bool_:'bool',
        np.uint8:'u8', np.int8:'i8', np.int16:'i16', np.uint16:'u16', np.uint32:'u32', np.uint64:'u64'}
DT = {np.float16:'Half', np.complex64:'Complex64'}

def lit(v, rt):
    if rt == 'bool': return 'true' if v else 'false'
    if rt in ('f32','f64'):
        f = float(v)
        if np.isnan(f): return f'{rt}::NAN'
        if np.isinf(f): return f'{rt}::INFINITY' if f > 0 else f'{rt}::NEG_INFINITY'
        r = str(np.float32(v)) if rt == 'f32' else repr(f)
        if 'e' not in r and '.' not in r: r += '.0'
        return r + rt
    return str(int(v)) + rt

def tensor(a):
    a = np.asarray(a)
    shape = 'vec![' + ', '.join(str(d) for d in a.shape) + ']'
    if a.dtype.kind in 'OSU':
        vals = ', '.join('Bytes::from_static(b"%s")' % (x if isinstance(x, bytes) else x.encode()).decode() for x in a.reshape(-1))
        return f'Tensor::strings(vec![{vals}], {shape}).unwrap()'
    t = a.dtype.type
    if t in RUST:
        rt = RUST[t]
        vals = ', '.join(lit(x, rt) for x in a.reshape(-1))
        if a.size == 0:
            return f'Tensor::from_slice::<{rt}>(&[], {shape}).unwrap()'
        return f'Tensor::from_slice(&[{vals}], {shape}).unwrap()'
    raw = ', '.join(str(b) for b in a.astype(a.dtype.newbyteorder('<')).tobytes())
    return f'raw(DType::{DT[t]}, {shape}, &[{raw}])'

def attr(k, v):
    if isinstance(v, bool): return f'("{k}", boolean({str(v).lower()}))'
    if isinstance(v, int): return f'("{k}", int({v}))'
    if isinstance(v, str): return f'("{k}", string("{v}"))'
    if isinstance(v, tf.dtypes.DType): return f'("{k}", ty(DType::{ {tf.int32:"Int32", tf.int64:"Int64"}[v]}))'
    if isinstance(v, tuple) and v and v[0] == 'shape': return f'("{k}", shape_attr(&[{", ".join(str(d) for d in v[1])}]))'
    if isinstance(v, list): return f'("{k}", ints(&[{", ".join(str(d) for d in v)}]))'
    raise ValueError(v)

out = []
def case(op, _err=None, _note=None, **kw):
    d = op_def_registry.get(op)
    in_names = [a.name for a in d.input_arg]
    attrs = {k: v for k, v in kw.items() if k not in in_names}
    inputs = []
    for a in d.input_arg:
        v = kw[a.name]
        if a.number_attr:
            attrs.setdefault(a.number_attr, len(v))
            inputs += [np.asarray(x) for x in v]
        else:
            inputs.append(np.asarray(v))
    # Call TF with tensors of the intended dtypes.
    tfkw = {}
    ren = {'ExpandDims': {'dim': 'axis'}, 'Squeeze': {'squeeze_dims': 'axis'}, 'Split': {'split_dim': 'axis'},
           'SplitV': {'split_dim': 'axis'}, 'Where': {'input': 'condition'}}.get(op, {})
    for k, v in kw.items():
        k0 = k
        k = ren.get(k, k)
        if k0 in in_names:
            tfkw[k] = [tf.constant(x) for x in v] if isinstance(v, list) and d.input_arg[in_names.index(k0)].number_attr else tf.constant(v)
        elif isinstance(v, tuple) and v and v[0] == 'shape':
            tfkw[k] = [None if x < 0 else x for x in v[1]]
        else:
            tfkw[k] = v
    attr_s = '&[' + ', '.join(attr(k, v) for k, v in attrs.items()) + ']'
    in_s = 'vec![' + ', '.join(tensor(x) for x in inputs) + ']'
    try:
        with tf.device('/CPU:0'):
            res = getattr(tf.raw_ops, op)(**tfkw)
    except Exception as e:
        msg = str(e)
        msg = re.sub(r'^\{\{function_node [^}]*\}\} ', '', msg)
        msg = re.sub(r' \[Op:\w+\].*$', '', msg, flags=re.S)
        want = _err if isinstance(_err, str) else msg
        if _err is None:
            print(f'NOTE unexpected TF error for {op} {kw}: {msg}', file=sys.stderr)
        out.append(f'    fails("{op}", {attr_s}, {in_s}, r#"{want}"#);')
        return
    if _err is not None:
        print(f'NOTE TF did not fail for {op} {kw}', file=sys.stderr)
    res = res if isinstance(res, (list, tuple)) else [res]
    exp = 'vec![' + ', '.join(tensor(r.numpy()) for r in res) + ']'
    out.append(f'    check("{op}", {attr_s}, {in_s}, {exp});')

exec(open(sys.argv[1]).read())
print('\n'.join(out))
