"""Answers as JSON: a submission's values (numbers, strings, containers, numpy arrays of numbers)
encoded where the submission's code runs and decoded by the grader, never as pickles or objects.

`CODEC` is the text of both functions: the grader sends it with every request to a student's
kernel (autograder.judge); `answer_call` and the grader use the functions themselves.
"""

#: The same text in the kernel (sent with every request), in a fresh answer call and in the grader.
CODEC = r'''
def _handson_encode(value, depth=0):
    import math, sys, types
    np = sys.modules.get("numpy")
    kind = type(value)
    if depth > 40:
        return {"__opaque__": "nested too deep"}
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if kind is list:
        return [_handson_encode(v, depth + 1) for v in value]
    if kind in (tuple, set, frozenset):
        return {"__" + kind.__name__ + "__": [_handson_encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"__dict__": [[_handson_encode(k, depth + 1), _handson_encode(v, depth + 1)] for k, v in value.items()]}
    if np is not None and kind is np.ndarray and value.dtype.kind in "biuf":
        return {"__ndarray__": _handson_encode(value.tolist(), depth + 1), "dtype": str(value.dtype)}
    if np is not None and isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"__numpy__": _handson_encode(value.item(), depth + 1), "dtype": str(value.dtype)}
    if kind is types.ModuleType:
        return {"__module__": value.__name__}
    if callable(value):
        return {"__callable__": getattr(value, "__name__", "?")}
    return {"__opaque__": kind.__name__}


def _handson_decode(data, module=None, call=None):
    import numpy
    if isinstance(data, list):
        return [_handson_decode(v, module, call) for v in data]
    if not isinstance(data, dict):
        return data
    if "__float__" in data:
        return float(data["__float__"])
    for name, kind in (("__tuple__", tuple), ("__set__", set), ("__frozenset__", frozenset)):
        if name in data:
            return kind(_handson_decode(v, module, call) for v in data[name])
    if "__dict__" in data:
        return {_handson_decode(k, module, call): _handson_decode(v, module, call) for k, v in data["__dict__"]}
    if "__ndarray__" in data or "__numpy__" in data:
        try:
            dtype = numpy.dtype(str(data.get("dtype")))
        except (TypeError, ValueError):
            dtype = None
        if dtype is None or dtype.kind not in "biuf" or dtype.shape or dtype.fields or dtype.itemsize > 8:
            raise TypeError("a numpy array of dtype " + str(data.get("dtype"))[:40] + " (numbers only)")
        if "__numpy__" in data:
            return dtype.type(data["__numpy__"])
        return numpy.array(_handson_decode(data["__ndarray__"]), dtype=dtype)
    if "__module__" in data and module is not None:
        return module(data["__module__"])
    if "__callable__" in data and call is not None:
        return call(data["__callable__"])
    raise TypeError("a value of type " + str(data.get("__opaque__", "?")) + " (not data: a number, string, "
                    "list, tuple, set, dict or numpy array)")
'''
_codec = {}
exec(CODEC, _codec)
encode, decode = _codec["_handson_encode"], _codec["_handson_decode"]
