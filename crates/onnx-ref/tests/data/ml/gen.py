#!/usr/bin/env python3
"""Generates the ai.onnx.ml test cases of crates/onnx-ref/tests/ml_models.rs.

Pinned versions (run with /work/venv/bin/python):
    onnx==1.23.2  onnxruntime==1.23.2  numpy==2.4.6

Each case is a one-node model built with onnx.helper, run in onnxruntime on fixed inputs, and
written in the backend-suite layout: test_<case>/model.onnx and
test_<case>/test_data_set_0/{input_0.pb, output_0.pb, ...}. Tensor inputs/outputs are
TensorProto, map inputs MapProto, sequence-of-map outputs SequenceProto. Rerun after changing a
case:  /work/venv/bin/python crates/onnx-ref/tests/data/ml/gen.py
"""

import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ML = "ai.onnx.ml"
F = TensorProto.FLOAT
I64 = TensorProto.INT64
STR = TensorProto.STRING

# Fixed inputs: five rows of three features, with signs mixed and values in [-1, 1].
X3 = np.array(
    [
        [0.5, -0.2, 0.1],
        [-0.7, 0.3, 0.9],
        [0.0, 0.0, 0.0],
        [1.0, 0.8, -0.6],
        [-0.3, -0.9, 0.4],
    ],
    dtype=np.float32,
)
# Inputs that keep linear scores inside (0, 1) for PROBIT.
X3_UNIT = (np.abs(X3) * 0.5 + 0.1).astype(np.float32)


def tensor_vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def map_vi(name, key, value):
    return helper.make_value_info(
        name, helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, None))
    )


def seq_map_vi(name, key):
    return helper.make_value_info(
        name,
        helper.make_sequence_type_proto(
            helper.make_map_type_proto(key, helper.make_tensor_type_proto(F, None))
        ),
    )


def model(node, inputs, outputs, ml_opset=3):
    graph = helper.make_graph([node], "g", inputs, outputs)
    m = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)],
        producer_name="onnx-ref ml gen.py",
    )
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def scalar_tensor(v):
    if isinstance(v, str):
        t = TensorProto(data_type=STR)
        t.string_data.append(v.encode())
        return t
    return numpy_helper.from_array(np.array(v))


def map_proto(d, name):
    keys = list(d.keys())
    m = onnx.MapProto(name=name)
    if isinstance(keys[0], str):
        m.key_type = STR
        m.string_keys.extend(k.encode() for k in keys)
    else:
        m.key_type = I64
        m.keys.extend(int(k) for k in keys)
    m.values.elem_type = onnx.SequenceProto.TENSOR
    for k in keys:
        m.values.tensor_values.append(scalar_tensor(d[k]))
    return m


def value_proto(v, name):
    if isinstance(v, dict):
        return map_proto(v, name)
    if isinstance(v, list):
        s = onnx.SequenceProto(name=name, elem_type=onnx.SequenceProto.MAP)
        for d in v:
            s.map_values.append(
                map_proto({k: np.float32(x) for k, x in d.items()}, "")
            )
        return s
    return numpy_helper.from_array(np.asarray(v), name)


for old in os.listdir(HERE):
    if old.startswith("test_"):
        shutil.rmtree(os.path.join(HERE, old))


def write(case, m, feeds):
    d = os.path.join(HERE, f"test_{case}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(m, os.path.join(d, "model.onnx"))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in m.graph.input]
    outs = sess.run(None, dict(zip(names, feeds)))
    data = os.path.join(d, "test_data_set_0")
    for i, (name, v) in enumerate(zip(names, feeds)):
        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
            f.write(value_proto(v, name).SerializeToString())
    for i, (o, v) in enumerate(zip(m.graph.output, outs)):
        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
            f.write(value_proto(v, o.name).SerializeToString())


def classifier_outputs(label_elem, n_scores):
    return [tensor_vi("label", label_elem, [None]), tensor_vi("scores", F, [None, n_scores])]


def labels_attr(kind, n, int_name):
    if kind == "str":
        return {"classlabels_strings": [f"c{i}" for i in range(n)]}
    return {int_name: [10 * (i + 1) for i in range(n)]}


# --- LinearClassifier -------------------------------------------------------------------

COEF3 = [0.6, -0.4, 0.3, -0.2, 0.5, 0.7, 0.1, 0.2, -0.8]
for transform in ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"]:
    x = X3_UNIT if transform == "PROBIT" else X3
    coef = [c * 0.3 for c in COEF3] if transform == "PROBIT" else COEF3
    node = helper.make_node(
        "LinearClassifier", ["X"], ["label", "scores"], domain=ML,
        coefficients=coef, intercepts=[0.1, 0.2, 0.05] if transform != "SOFTMAX_ZERO" else [0.0, 0.2, 0.0],
        post_transform=transform, **labels_attr("int", 3, "classlabels_ints"),
    )
    write(f"linear_classifier_multi_{transform.lower()}",
          model(node, [tensor_vi("X", F, [None, 3])], classifier_outputs(I64, 3)), [x])

for transform in ["NONE", "LOGISTIC"]:
    node = helper.make_node(
        "LinearClassifier", ["X"], ["label", "scores"], domain=ML,
        coefficients=[0.6, -0.4, 0.3], intercepts=[0.05], post_transform=transform,
        **labels_attr("str", 2, "classlabels_ints"),
    )
    write(f"linear_classifier_binary_strings_{transform.lower()}",
          model(node, [tensor_vi("X", F, [None, 3])], classifier_outputs(STR, 2)), [X3])

# skl2onnx's binary LogisticRegression: two mirrored rows, LOGISTIC; int32 input.
node = helper.make_node(
    "LinearClassifier", ["X"], ["label", "scores"], domain=ML,
    coefficients=[-0.6, 0.4, -0.3, 0.6, -0.4, 0.3], intercepts=[-0.05, 0.05],
    post_transform="LOGISTIC", classlabels_ints=[0, 1],
)
write("linear_classifier_two_rows_int32",
      model(node, [tensor_vi("X", TensorProto.INT32, [None, 3])], classifier_outputs(I64, 2)),
      [np.array([[1, -2, 0], [0, 0, 0], [3, 1, -1]], dtype=np.int32)])

# --- SVMClassifier ----------------------------------------------------------------------

SV = [0.2, 0.1, -0.3, -0.5, 0.4, 0.2, 0.9, -0.1, 0.0, 0.3, 0.3, 0.3, -0.6, -0.2, 0.8]
KERNEL_PARAMS = {"LINEAR": [0.0, 0.0, 0.0], "POLY": [0.5, 0.2, 3.0], "RBF": [0.7, 0.0, 0.0],
                 "SIGMOID": [0.4, 0.1, 0.0]}


def svc_node(kernel, n_classes, transform="NONE", proba=False, labels="int"):
    if n_classes == 3:
        per_class, rho = [2, 2, 1], [0.1, -0.2, 0.05]
        coef = [0.5, -0.3, 0.8, 0.2, -0.6, 0.4, -0.7, 0.9, 0.3, -0.2]
    else:
        per_class, rho = [3, 2], [0.15]
        coef = [0.5, -0.3, 0.8, -0.6, 0.4]
    attrs = dict(
        kernel_type=kernel, kernel_params=KERNEL_PARAMS[kernel], vectors_per_class=per_class,
        support_vectors=SV, coefficients=coef, rho=rho, post_transform=transform,
        **labels_attr(labels, n_classes, "classlabels_ints"),
    )
    if proba:
        pairs = n_classes * (n_classes - 1) // 2
        attrs["prob_a"] = [-1.5, -0.8, -2.0][:pairs]
        attrs["prob_b"] = [0.1, -0.2, 0.05][:pairs]
    return helper.make_node("SVMClassifier", ["X"], ["label", "scores"], domain=ML, **attrs)


def svc_width(n_classes, proba):
    return n_classes if proba else (3 if n_classes == 3 else 2)


for kernel in ["LINEAR", "POLY", "RBF", "SIGMOID"]:
    write(f"svm_classifier_{kernel.lower()}_multi",
          model(svc_node(kernel, 3), [tensor_vi("X", F, [None, 3])], classifier_outputs(I64, 3)),
          [X3])
for kernel, transform, proba, labels in [
    ("RBF", "NONE", False, "int"),
    ("RBF", "LOGISTIC", False, "str"),
    ("POLY", "NONE", True, "int"),
    ("RBF", "SOFTMAX", True, "str"),
]:
    n = 2
    node = svc_node(kernel, n, transform, proba, labels)
    write(f"svm_classifier_{kernel.lower()}_binary_{transform.lower()}{'_proba' if proba else ''}",
          model(node, [tensor_vi("X", F, [None, 3])],
                classifier_outputs(STR if labels == "str" else I64, svc_width(n, proba))), [X3])
for transform in ["NONE", "SOFTMAX", "SOFTMAX_ZERO", "LOGISTIC", "PROBIT"]:
    node = svc_node("RBF", 3, transform, True)
    write(f"svm_classifier_rbf_multi_proba_{transform.lower()}",
          model(node, [tensor_vi("X", F, [None, 3])], classifier_outputs(I64, 3)), [X3])
write("svm_classifier_sigmoid_multi_softmax",
      model(svc_node("SIGMOID", 3, "SOFTMAX"), [tensor_vi("X", F, [None, 3])],
            classifier_outputs(I64, 3)), [X3])

# Linear (liblinear) mode: no support vectors.
for n_classes, transform in [(3, "NONE"), (3, "SOFTMAX"), (2, "NONE"), (2, "LOGISTIC")]:
    node = helper.make_node(
        "SVMClassifier", ["X"], ["label", "scores"], domain=ML,
        coefficients=COEF3[: 3 * n_classes], rho=[0.1], post_transform=transform,
        kernel_params=[0.0, 0.0, 0.0],
        **labels_attr("int", n_classes, "classlabels_ints"),
    )
    write(f"svm_classifier_liblinear_{n_classes}_{transform.lower()}",
          model(node, [tensor_vi("X", F, [None, 3])], classifier_outputs(I64, n_classes)), [X3])

# --- SVMRegressor -----------------------------------------------------------------------

for kernel in ["LINEAR", "POLY", "RBF", "SIGMOID"]:
    node = helper.make_node(
        "SVMRegressor", ["X"], ["Y"], domain=ML, kernel_type=kernel,
        kernel_params=KERNEL_PARAMS[kernel], n_supports=5, support_vectors=SV,
        coefficients=[0.5, -0.3, 0.8, -0.6, 0.4], rho=[0.15],
    )
    write(f"svm_regressor_{kernel.lower()}",
          model(node, [tensor_vi("X", F, [None, 3])], [tensor_vi("Y", F, [None, 1])]), [X3])
node = helper.make_node("SVMRegressor", ["X"], ["Y"], domain=ML,
                        coefficients=[0.5, -0.3, 0.8], rho=[-0.1], kernel_params=[0.0, 0.0, 0.0])
write("svm_regressor_liblinear",
      model(node, [tensor_vi("X", F, [None, 3])], [tensor_vi("Y", F, [None, 1])]), [X3])
node = helper.make_node(
    "SVMRegressor", ["X"], ["Y"], domain=ML, kernel_type="RBF", kernel_params=[0.7, 0, 0],
    n_supports=5, support_vectors=SV, coefficients=[0.5, -0.3, 0.8, -0.6, 0.4], rho=[-0.4],
    one_class=1,
)
write("svm_regressor_one_class",
      model(node, [tensor_vi("X", F, [None, 3])], [tensor_vi("Y", F, [None, 1])]), [X3])

# --- TreeEnsembleClassifier -------------------------------------------------------------

# Two trees over three features. Tree 0: x0 <= 0.2 ? (x1 < 0 ? leaf 3 : leaf 4) : leaf 2.
# Tree 1: x2 > 0.3 ? leaf 1 : leaf 2.
TREES = dict(
    nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1],
    nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2],
    nodes_featureids=[0, 1, 0, 0, 0, 2, 0, 0],
    nodes_modes=["BRANCH_LEQ", "BRANCH_LT", "LEAF", "LEAF", "LEAF", "BRANCH_GT", "LEAF", "LEAF"],
    nodes_values=[0.2, 0.0, 0, 0, 0, 0.3, 0, 0],
    nodes_truenodeids=[1, 3, 0, 0, 0, 1, 0, 0],
    nodes_falsenodeids=[2, 4, 0, 0, 0, 2, 0, 0],
    nodes_missing_value_tracks_true=[0, 1, 0, 0, 0, 0, 0, 0],
)
LEAVES = [(0, 2), (0, 3), (0, 4), (1, 1), (1, 2)]


def tree_node(class_weights, base_values=None, transform="NONE", labels="int", n_classes=3,
              as_tensor=False):
    """class_weights: per leaf of LEAVES, a list of (class id, weight)."""
    treeids, nodeids, ids, weights = [], [], [], []
    for (t, nd), ws in zip(LEAVES, class_weights):
        for c, w in ws:
            treeids.append(t)
            nodeids.append(nd)
            ids.append(c)
            weights.append(w)
    attrs = dict(TREES, class_treeids=treeids, class_nodeids=nodeids, class_ids=ids,
                 post_transform=transform, **labels_attr(labels, n_classes, "classlabels_int64s"))
    if as_tensor:
        attrs["class_weights_as_tensor"] = numpy_helper.from_array(
            np.array(weights, dtype=np.float32), "w")
        attrs["nodes_values_as_tensor"] = numpy_helper.from_array(
            np.array(attrs.pop("nodes_values"), dtype=np.float32), "v")
        if base_values is not None:
            attrs["base_values_as_tensor"] = numpy_helper.from_array(
                np.array(base_values, dtype=np.float32), "b")
    else:
        attrs["class_weights"] = weights
        if base_values is not None:
            attrs["base_values"] = base_values
    return helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "scores"], domain=ML,
                            **attrs)


X_TREE = np.array(
    [[0.1, -0.5, 0.9], [0.1, 0.5, 0.0], [0.7, 0.0, 0.5], [0.7, 0.0, 0.1], [0.2, np.nan, 0.4]],
    dtype=np.float32,
)
MULTI = [[(0, 0.6), (1, 0.4)], [(1, 0.8), (2, 0.2)], [(2, 1.0)], [(0, 0.3)], [(1, 0.5), (2, 0.1)]]
for transform, base in [("NONE", None), ("SOFTMAX", [0.1, -0.1, 0.2]), ("LOGISTIC", [0.5, 0.0, -0.5]),
                        ("SOFTMAX_ZERO", None), ("PROBIT", [0.05, 0.05, 0.05])]:
    node = tree_node([[(c, w * 0.4) for c, w in ws] for ws in MULTI] if transform == "PROBIT" else MULTI,
                     base, transform)
    write(f"tree_classifier_multi_{transform.lower()}",
          model(node, [tensor_vi("X", F, [None, 3])], classifier_outputs(I64, 3)), [X_TREE])
node = tree_node(MULTI, [0.1, 0.2, 0.3], "SOFTMAX", "str")
write("tree_classifier_multi_strings",
      model(node, [tensor_vi("X", TensorProto.DOUBLE, [None, 3])], classifier_outputs(STR, 3)),
      [X_TREE.astype(np.float64)])
node = tree_node(MULTI, [0.1, 0.2, 0.3], "NONE", as_tensor=True)
write("tree_classifier_as_tensor",
      model(node, [tensor_vi("X", F, [None, 3])], classifier_outputs(I64, 3)), [X_TREE])
node = tree_node(MULTI, None, "NONE")
write("tree_classifier_opset1",
      model(node, [tensor_vi("X", TensorProto.INT64, [None, 3])], classifier_outputs(I64, 3),
            ml_opset=1),
      [np.array([[0, -1, 1], [1, 0, 0], [0, 1, 1]], dtype=np.int64)])

# Binary: weights for one class only (gradient boosting style), each base_values length,
# all-positive (probability) and mixed-sign (margin) weights.
POS = [[(1, 0.9)], [(1, 0.2)], [(1, 0.6)], [(1, 0.3)], [(1, 0.1)]]
MIXED = [[(1, 1.2)], [(1, -0.7)], [(1, 0.4)], [(1, -0.3)], [(1, 0.5)]]
CLASS0 = [[(0, 1.2)], [(0, -0.7)], [(0, 0.4)], [(0, -0.3)], [(0, 0.5)]]
for name, weights, base, transform, labels in [
    ("pos_none", POS, None, "NONE", "int"),
    ("pos_logistic", POS, None, "LOGISTIC", "int"),
    ("mixed_none", MIXED, None, "NONE", "int"),
    ("mixed_logistic", MIXED, None, "LOGISTIC", "str"),
    ("mixed_base1_logistic", MIXED, [-0.2], "LOGISTIC", "int"),
    ("mixed_base2_none", MIXED, [0.3, 0.3], "NONE", "int"),
    ("class0_base1_none", CLASS0, [0.1], "NONE", "int"),
    ("class0_none", CLASS0, None, "NONE", "str"),
    ("both_classes_none", [[(0, 0.4), (1, 0.6)], [(0, 0.9), (1, 0.1)], [(1, 1.0)], [(0, 0.5), (1, 0.5)],
                           [(0, 0.2), (1, 0.8)]], None, "NONE", "int"),
    ("both_classes_softmax", [[(0, 0.4), (1, 0.6)], [(0, 0.9), (1, 0.1)], [(1, 1.0)], [(0, 0.5), (1, 0.5)],
                              [(0, 0.2), (1, 0.8)]], [0.1, -0.1], "SOFTMAX", "str"),
]:
    node = tree_node(weights, base, transform, labels, n_classes=2)
    write(f"tree_classifier_binary_{name}",
          model(node, [tensor_vi("X", F, [None, 3])],
                classifier_outputs(STR if labels == "str" else I64, 2)), [X_TREE])

# --- ZipMap, CategoryMapper, DictVectorizer, CastMap -------------------------------------

SCORES = np.array([[0.1, 0.7, 0.2], [0.5, 0.25, 0.25]], dtype=np.float32)
node = helper.make_node("ZipMap", ["X"], ["Z"], domain=ML, classlabels_int64s=[30, 10, 20])
write("zipmap_int_keys", model(node, [tensor_vi("X", F, [None, 3])], [seq_map_vi("Z", I64)]),
      [SCORES])
node = helper.make_node("ZipMap", ["X"], ["Z"], domain=ML, classlabels_strings=["b", "c", "a"])
write("zipmap_string_keys", model(node, [tensor_vi("X", F, [None, 3])], [seq_map_vi("Z", STR)]),
      [SCORES])

CATS = dict(cats_strings=["cat", "dog", "bird"], cats_int64s=[1, 2, 3])
node = helper.make_node("CategoryMapper", ["X"], ["Y"], domain=ML, default_int64=-9, **CATS)
write("category_mapper_to_int",
      model(node, [tensor_vi("X", STR, [None, 2])], [tensor_vi("Y", I64, [None, 2])]),
      [np.array([["dog", "fish"], ["bird", "cat"]], dtype=object)])
node = helper.make_node("CategoryMapper", ["X"], ["Y"], domain=ML, default_string="none", **CATS)
write("category_mapper_to_string",
      model(node, [tensor_vi("X", I64, [None])], [tensor_vi("Y", STR, [None])]),
      [np.array([3, 0, 1, 2], dtype=np.int64)])

node = helper.make_node("DictVectorizer", ["X"], ["Y"], domain=ML,
                        string_vocabulary=["a", "b", "c", "d"])
write("dict_vectorizer_string_float",
      model(node, [map_vi("X", STR, F)], [tensor_vi("Y", F, [1, 4])]),
      [{"c": np.float32(2.5), "a": np.float32(-1.0), "z": np.float32(9.0)}])
node = helper.make_node("DictVectorizer", ["X"], ["Y"], domain=ML, int64_vocabulary=[5, 3, 1])
write("dict_vectorizer_int_float",
      model(node, [map_vi("X", I64, F)], [tensor_vi("Y", F, [1, 3])]),
      [{1: np.float32(0.5), 5: np.float32(7.25)}])

FLOAT_MAP = {3: np.float32(1.5), 0: np.float32(-2.0), 1: np.float32(0.25)}
for name, attrs, out_elem in [
    ("dense_to_float", dict(cast_to="TO_FLOAT"), F),
    ("dense_to_int64", dict(cast_to="TO_INT64"), I64),
    ("sparse_to_float", dict(cast_to="TO_FLOAT", map_form="SPARSE", max_map=5), F),
    ("sparse_to_string", dict(cast_to="TO_STRING", map_form="SPARSE", max_map=5), STR),
]:
    node = helper.make_node("CastMap", ["X"], ["Y"], domain=ML, **attrs)
    write(f"cast_map_{name}", model(node, [map_vi("X", I64, F)], [tensor_vi("Y", out_elem, [1, None])]),
          [FLOAT_MAP])
# (onnxruntime's Python API cannot feed map(int64, string): those are unit tests.)

total = sum(
    os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(HERE) for f in fs
    if not f.endswith(".py")
)
print(f"wrote {len([d for d in os.listdir(HERE) if d.startswith('test_')])} cases, {total} bytes")
