"""DecodeJSONExample (tf.io.decode_json_example): proto3 JSON Examples to
binary, as TensorFlow's protobuf JSON reader writes them (JSON field and
map order, unpacked values, nulls, its leniencies) and its errors.

TensorFlow's JSON error messages pad some words with a varying number of
spaces from run to run; the cases keep them with runs of spaces collapsed
to one (regenerating then gives the same bytes), which tfdata's messages
match."""

import re

import tensorflow as tf

from harness import Family

R = tf.raw_ops

GOOD = [
    ("all kinds", '{"features":{"feature":{"b":{"int64List":{"value":["1","-2",3]}},'
     '"a":{"floatList":{"value":[1.5,"NaN","-Infinity","Infinity","1.25",3.4028235e38,'
     '1e-50,0.1,-0.0]}},"c":{"bytesList":{"value":["aGk=","w6k=",""]}}}}}'),
    ("empty object", "{}"),
    ("empty features", '{"features":{}}'),
    ("empty map", '{"features":{"feature":{}}}'),
    ("empty feature", '{"features":{"feature":{"x":{}}}}'),
    ("empty list", '{"features":{"feature":{"x":{"int64List":{}}}}}'),
    ("empty values", '{"features":{"feature":{"x":{"int64List":{"value":[]}}}}}'),
    ("proto field names", '{"features":{"feature":{"x":{"int64_list":{"value":[1]}},'
     '"y":{"bytes_list":{"value":["eQ=="]}},"z":{"float_list":{"value":[2]}}}}}'),
    ("int64 extremes", '{"features":{"feature":{"b":{"int64List":{"value":'
     '[9223372036854775807,-9223372036854775808,"-9223372036854775808",0,-0,1e3,'
     '9007199254740993]}}}}}'),
    ("int64 strings", '{"features":{"feature":{"b":{"int64List":{"value":["0x10","1e3"]}}}}}'),
    ("features twice", '{"features":{"feature":{"x":{"int64List":{"value":[1]}}}},'
     '"features":{"feature":{"y":{"int64List":{"value":[2]}}}}}'),
    ("whitespace", ' \n {"features" : { "feature" : { } } } \n'),
    ("scalar value", '{"features":{"feature":{"x":{"int64List":{"value":1}}}}}'),
    ("null value", '{"features":{"feature":{"x":{"int64List":{"value":null}}}}}'),
    ("null element", '{"features":{"feature":{"x":{"int64List":{"value":[null]}}}}}'),
    ("null list", '{"features":{"feature":{"x":{"int64List":null}}}}'),
    ("null feature", '{"features":{"feature":{"x":null}}}'),
    ("null features", '{"features":null}'),
    ("trailing comma", '{"features":{"feature":{"x":{"int64List":{"value":[1,]}}}}}'),
    ("unicode key", '{"features":{"feature":{"\\u00e9\\ud83d\\ude00":{"int64List":{"value":[1]}},'
     '"\u00fc":{"int64List":{"value":[2]}}}}}'),
    ("lowercase nan", '{"features":{"feature":{"x":{"floatList":{"value":["nan","-infinity"]}}}}}'),
    ("single quotes", "{'features':{'feature':{'q':{'bytesList':{'value':['aGk']}}}}}"),
    ("url-safe base64", '{"features":{"feature":{"x":{"bytesList":{"value":["a-_b"]}}}}}'),
    ("float rounding", '{"features":{"feature":{"x":{"floatList":{"value":'
     '[1.0000001,16777217,3.14159265358979,-1e-45,1e-310,1.1754943e-38,1.1754944e-38]}}}}}'),
]

BAD = [
    ("float out of range", '{"features":{"feature":{"x":{"floatList":{"value":[1.5,1e40]}}}}}'),
    ("position after numbers", '{"features":{"feature":{"x":{"int64List":{"value":[1, 22,\n 333, 2.5]}}}}}'),
    ("position after a line", '{"features":{"feature":{"y":{"int64List":{"value":[12]}},\n"x":{"bogus":1}}}}'),
    ("empty", ""),
    ("cut", '{"features":'),
    ("null", "null"),
    ("array", "[1]"),
    ("unknown field", '{"bogus":1}'),
    ("capitalised field", '{"Features":{}}'),
    ("unknown list", '{"features":{"feature":{"x":{"Int64List":{}}}}}'),
    ("fractional int", '{"features":{"feature":{"x":{"int64List":{"value":[1.5]}}}}}'),
    ("int out of range", '{"features":{"feature":{"x":{"int64List":{"value":'
     '["9223372036854775808"]}}}}}'),
    ("bool int", '{"features":{"feature":{"x":{"int64List":{"value":[true]}}}}}'),
    ("corrupt base64", '{"features":{"feature":{"x":{"bytesList":{"value":["@@"]}}}}}'),
    ("newline in base64", '{"features":{"feature":{"x":{"bytesList":{"value":["a\\nb"]}}}}}'),
    ("two kinds", '{"features":{"feature":{"x":{"int64List":{"value":[1]},'
     '"floatList":{"value":[1]}}}}}'),
    ("repeated key", '{"features":{"feature":{"x":{"int64List":{"value":[1]}},'
     '"x":{"int64List":{"value":[2]}}}}}'),
    ("trailing text", '{"features":{"feature":{"x":{"int64List":{"value":[1]}}}}} x'),
]


def family():
    fam = Family("json_example")
    op = lambda j: R.DecodeJSONExample(json_examples=j)  # noqa: E731
    for name, text in GOOD:
        fam.add("DecodeJSONExample", op, [tf.constant(text)], f"DecodeJSONExample/{name}")
    fam.add("DecodeJSONExample", op, [tf.constant([[g[1] for g in GOOD[:3]]] * 2)],
            "DecodeJSONExample/matrix")
    fam.add("DecodeJSONExample", op, [tf.constant([], tf.string)], "DecodeJSONExample/none")
    for name, text in BAD:
        fam.add("DecodeJSONExample", op, [tf.constant(text)], f"DecodeJSONExample/error/{name}")
        err = fam.cases[-1]["error"]
        err["message"] = re.sub(r" +", " ", err["message"])
    return fam
