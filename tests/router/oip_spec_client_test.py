"""The router's Open Inference Protocol front end, driven by a client
generated independently from the specification's proto at test time (not the
superserve package): health and metadata, ModelInfer results against the
native protocol for the same inputs, ModelStreamInfer, deadlines, and errors.

Run by ctest (tests/router/CMakeLists.txt) with
  SUPERSERVE_BIN_DIR, SUPERSERVE_SOURCE_DIR, PROTOC, GRPC_PYTHON_PLUGIN
and PYTHONPATH holding clients/python and <build>/python (for the native
comparison and the local cluster).
"""

import importlib
import os
import subprocess
import sys
import tempfile
import unittest

import grpc
import numpy as np

BIN = os.environ["SUPERSERVE_BIN_DIR"]
SRC = os.environ["SUPERSERVE_SOURCE_DIR"]
REPO = os.path.join(SRC, "tests/router/testdata/emulated_repo")
# The emulated model's Pareto subnets: id -> profiled accuracy (profile.json).
SUBNET_ACCURACY = {0: 80.0, 1: 85.0, 2: 88.0, 3: 90.0}


def generate_spec_stubs(out_dir):
    """protoc + grpc_python_plugin on the spec proto, into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run([os.environ["PROTOC"], f"-I{SRC}/proto", f"--python_out={out_dir}",
                    f"--grpc_out={out_dir}",
                    f"--plugin=protoc-gen-grpc={os.environ['GRPC_PYTHON_PLUGIN']}",
                    f"{SRC}/proto/inference/grpc_predict_v2.proto"], check=True)
    sys.path.insert(0, out_dir)
    pb = importlib.import_module("inference.grpc_predict_v2_pb2")
    pbg = importlib.import_module("inference.grpc_predict_v2_pb2_grpc")
    return pb, pbg


def sample(i):
    rng = np.random.default_rng(i)
    return rng.random((1, 28, 28), dtype=np.float32)


# The specification's messages (KServe's grpc_predict_v2.proto; the last
# two InferParameter fields and ModelStreamInferResponse are Triton's),
# transcribed: "field number type", "+" for repeated, "map" for a
# map<string, InferParameter>.
SPEC = {
    "ServerLiveRequest": "", "ServerLiveResponse": "live 1 bool",
    "ServerReadyRequest": "", "ServerReadyResponse": "ready 1 bool",
    "ModelReadyRequest": "name 1 string, version 2 string",
    "ModelReadyResponse": "ready 1 bool",
    "ServerMetadataRequest": "",
    "ServerMetadataResponse": "name 1 string, version 2 string, extensions 3 +string",
    "ModelMetadataRequest": "name 1 string, version 2 string",
    "ModelMetadataResponse": "name 1 string, versions 2 +string, platform 3 string, "
                             "inputs 4 +message, outputs 5 +message",
    "ModelMetadataResponse.TensorMetadata": "name 1 string, datatype 2 string, shape 3 +int64",
    "ModelInferRequest": "model_name 1 string, model_version 2 string, id 3 string, "
                         "parameters 4 map, inputs 5 +message, outputs 6 +message, "
                         "raw_input_contents 7 +bytes",
    "ModelInferRequest.InferInputTensor": "name 1 string, datatype 2 string, shape 3 +int64, "
                                          "parameters 4 map, contents 5 message",
    "ModelInferRequest.InferRequestedOutputTensor": "name 1 string, parameters 2 map",
    "ModelInferResponse": "model_name 1 string, model_version 2 string, id 3 string, "
                          "parameters 4 map, outputs 5 +message, raw_output_contents 6 +bytes",
    "ModelInferResponse.InferOutputTensor": "name 1 string, datatype 2 string, shape 3 +int64, "
                                            "parameters 4 map, contents 5 message",
    "ModelStreamInferResponse": "error_message 1 string, infer_response 2 message",
    "InferParameter": "bool_param 1 bool, int64_param 2 int64, string_param 3 string, "
                      "double_param 4 double, uint64_param 5 uint64",
    "InferTensorContents": "bool_contents 1 +bool, int_contents 2 +int32, "
                           "int64_contents 3 +int64, uint_contents 4 +uint32, "
                           "uint64_contents 5 +uint64, fp32_contents 6 +float, "
                           "fp64_contents 7 +double, bytes_contents 8 +bytes",
}
SPEC_METHODS = {  # name: (request, response, client streaming, server streaming)
    "ServerLive": ("ServerLiveRequest", "ServerLiveResponse", False, False),
    "ServerReady": ("ServerReadyRequest", "ServerReadyResponse", False, False),
    "ModelReady": ("ModelReadyRequest", "ModelReadyResponse", False, False),
    "ServerMetadata": ("ServerMetadataRequest", "ServerMetadataResponse", False, False),
    "ModelMetadata": ("ModelMetadataRequest", "ModelMetadataResponse", False, False),
    "ModelInfer": ("ModelInferRequest", "ModelInferResponse", False, False),
    "ModelStreamInfer": ("ModelInferRequest", "ModelStreamInferResponse", True, True),
}


def describe(field):
    from google.protobuf.descriptor import FieldDescriptor as F
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return f"{field.name} {field.number} map"
    names = {F.TYPE_BOOL: "bool", F.TYPE_INT32: "int32", F.TYPE_INT64: "int64",
             F.TYPE_UINT32: "uint32", F.TYPE_UINT64: "uint64", F.TYPE_FLOAT: "float",
             F.TYPE_DOUBLE: "double", F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes",
             F.TYPE_MESSAGE: "message"}
    rep = "+" if field.label == F.LABEL_REPEATED else ""
    return f"{field.name} {field.number} {rep}{names[field.type]}"


class SpecConformanceTest(unittest.TestCase):
    """proto/inference/grpc_predict_v2.proto declares the specification's
    package, service, messages, field names, numbers and types."""

    def test_messages_and_service_match_the_specification(self):
        with tempfile.TemporaryDirectory() as d:
            pb, _ = generate_spec_stubs(d)
        fd = pb.DESCRIPTOR
        self.assertEqual(fd.package, "inference")
        for name, fields in SPEC.items():
            msg = fd.message_types_by_name[name.split(".")[0]]
            for nested in name.split(".")[1:]:
                msg = msg.nested_types_by_name[nested]
            want = sorted(f for f in fields.split(", ") if f)
            self.assertEqual(sorted(describe(f) for f in msg.fields), want, name)
        svc = fd.services_by_name["GRPCInferenceService"]
        self.assertEqual(svc.full_name, "inference.GRPCInferenceService")
        got = {m.name: (m.input_type.name, m.output_type.name, m.client_streaming,
                        m.server_streaming) for m in svc.methods}
        self.assertEqual(got, SPEC_METHODS)


class OipTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="superserve-oip-")
        cls.pb, pbg = generate_spec_stubs(os.path.join(cls.tmp.name, "stubs"))
        from superserve.local_cluster import LocalCluster
        cls.cluster = LocalCluster(BIN, REPO, cls.tmp.name, workers=2, emulate=True)
        cls.channel = grpc.insecure_channel(cls.cluster.address)
        cls.stub = pbg.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.cluster.stop()
        cls.tmp.cleanup()

    def request(self, x, model="emu", raw=True, **kw):
        pb = self.pb
        req = pb.ModelInferRequest(model_name=model, id=kw.pop("id", ""))
        t = req.inputs.add(name=kw.pop("name", "input"), datatype=kw.pop("datatype", "FP32"))
        t.shape.extend(kw.pop("shape", (1,) + x.shape))
        if raw:
            req.raw_input_contents.append(x.astype(np.float32).tobytes())
        else:
            t.contents.fp32_contents.extend(x.astype(np.float32).ravel().tolist())
        for k, v in kw.pop("params", {}).items():
            if isinstance(v, bool):
                req.parameters[k].bool_param = v
            else:
                req.parameters[k].int64_param = v
        assert not kw, kw
        return req

    def assert_code(self, call, code, *words):
        with self.assertRaises(grpc.RpcError) as e:
            call()
        self.assertEqual(e.exception.code(), code, e.exception.details())
        for w in words:
            self.assertIn(w, e.exception.details())

    def test_health_and_server_metadata(self):
        pb = self.pb
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest(), timeout=5).live)
        self.assertTrue(self.stub.ServerReady(pb.ServerReadyRequest(), timeout=5).ready)
        md = self.stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=5)
        self.assertEqual(md.name, "superserve")
        self.assertTrue(md.version)
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="emu"), timeout=5).ready)
        self.assert_code(lambda: self.stub.ModelReady(pb.ModelReadyRequest(name="nope"),
                                                      timeout=5),
                         grpc.StatusCode.NOT_FOUND, "nope")

    def test_model_metadata(self):
        pb = self.pb
        md = self.stub.ModelMetadata(pb.ModelMetadataRequest(name="emu"), timeout=5)
        self.assertEqual(md.name, "emu")
        self.assertEqual(len(md.versions), 1)
        self.assertEqual(len(md.inputs), 1)
        self.assertEqual((md.inputs[0].name, md.inputs[0].datatype, list(md.inputs[0].shape)),
                         ("input", "FP32", [-1, 1, 28, 28]))
        self.assertEqual((md.outputs[0].name, md.outputs[0].datatype, list(md.outputs[0].shape)),
                         ("logits", "FP32", [-1, 10]))
        # The listed version is accepted, another is not.
        self.stub.ModelMetadata(pb.ModelMetadataRequest(name="emu", version=md.versions[0]),
                                timeout=5)
        self.assert_code(lambda: self.stub.ModelMetadata(
            pb.ModelMetadataRequest(name="emu", version="999"), timeout=5),
            grpc.StatusCode.NOT_FOUND, "emu", "999")
        self.assert_code(lambda: self.stub.ModelMetadata(pb.ModelMetadataRequest(name="nope"),
                                                         timeout=5),
                         grpc.StatusCode.NOT_FOUND, "nope", "emu")

    def test_infer_matches_native_protocol(self):
        import superserve
        with superserve.Client(self.cluster.address) as native:
            for i in range(8):
                x = sample(i)
                want = native.infer("emu", x, timeout=2.0)
                got = self.stub.ModelInfer(
                    self.request(x, id=f"q{i}", params={"superserve_details": i % 2 == 0}),
                    timeout=2.0)
                self.assertEqual(got.model_name, "emu")
                self.assertEqual(got.id, f"q{i}")
                self.assertEqual(len(got.outputs), 1)
                out = got.outputs[0]
                self.assertEqual((out.name, out.datatype, list(out.shape)),
                                 ("logits", "FP32", [1, 10]))
                y = np.frombuffer(got.raw_output_contents[0], dtype="<f4").reshape(out.shape)
                np.testing.assert_array_equal(y[0], want.output)
                p = got.parameters
                subnet = p["superserve_subnet_id"].int64_param
                self.assertIn(subnet, SUBNET_ACCURACY)
                self.assertEqual(p["superserve_accuracy"].double_param, SUBNET_ACCURACY[subnet])
                if i % 2 == 0:  # asked for details
                    self.assertGreaterEqual(p["superserve_batch_size"].int64_param, 1)
                    self.assertTrue(p["superserve_worker"].string_param)
                    self.assertIn("superserve_exec_us", p)
                else:
                    self.assertEqual(set(p), {"superserve_subnet_id", "superserve_accuracy"})
                # Typed contents give the same answer as raw bytes.
                typed = self.stub.ModelInfer(self.request(x, raw=False), timeout=2.0)
                self.assertEqual(typed.raw_output_contents[0], got.raw_output_contents[0])

    def test_requested_output_by_name(self):
        req = self.request(sample(1))
        req.outputs.add(name="logits")
        self.assertEqual(len(self.stub.ModelInfer(req, timeout=2.0).raw_output_contents), 1)
        req.outputs.add(name="probabilities")
        self.assert_code(lambda: self.stub.ModelInfer(req, timeout=2.0),
                         grpc.StatusCode.INVALID_ARGUMENT, "probabilities", "logits")

    def test_timeout_parameter_is_the_deadline(self):
        x = sample(2)
        # 1 us cannot be met: the router drops it, though the gRPC deadline is 5 s.
        self.assert_code(lambda: self.stub.ModelInfer(self.request(x, params={"timeout": 1}),
                                                      timeout=5.0),
                         grpc.StatusCode.DEADLINE_EXCEEDED)
        # A generous parameter with no gRPC deadline at all is served.
        ok = self.stub.ModelInfer(self.request(x, params={"timeout": 2_000_000}))
        self.assertEqual(len(ok.raw_output_contents), 1)
        # Without the parameter the gRPC deadline counts: 100 us is too tight
        # for the 1-12 ms emulated subnets plus queueing and the round trip,
        # so the router (or the client's own deadline) answers DEADLINE_EXCEEDED.
        # (Not 0.5 ms: gRPC's deadlines are about a millisecond coarse, and 11
        # of 400 such calls were served by the 1.08-ms subnet in 1.4 ms.)
        self.assert_code(lambda: self.stub.ModelInfer(self.request(x), timeout=0.0001),
                         grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_errors_name_the_problem(self):
        x = sample(3)
        bad = [
            (self.request(x, model="nope"), "nope"),
            (self.request(x, datatype="INT64"), "INT64"),
            (self.request(x, name="image"), "image"),
            (self.request(x, shape=(2, 1, 28, 28)), "[2,1,28,28]"),
            (self.request(x[:, :, :27], shape=(1, 1, 28, 27)), "[1,28,27], expected [1,28,28]"),
            (self.request(x, shape=(1, 28, 28)), "the OIP input shape is [1] followed by"),
            (self.request(x, shape=(1, 1, 28, 28, 1)), "shape"),
        ]
        short = self.request(x)
        short.raw_input_contents[0] = short.raw_input_contents[0][:100]
        bad.append((short, "bytes"))
        nodata = self.request(x)
        del nodata.raw_input_contents[:]
        bad.append((nodata, "no data"))
        both = self.request(x, raw=False)
        both.raw_input_contents.append(x.tobytes())
        bad.append((both, "raw_input_contents"))
        two = self.request(x)
        two.inputs.add(name="extra", datatype="FP32")
        bad.append((two, "one input"))
        for req, word in bad:
            with self.subTest(word=word):
                self.assert_code(lambda: self.stub.ModelInfer(req, timeout=2.0),
                                 grpc.StatusCode.INVALID_ARGUMENT, word)

    def test_stream_infer(self):
        reqs = [self.request(sample(i), id=f"s{i}") for i in range(20)]
        reqs.append(self.request(sample(0), model="nope", id="bad"))
        answers = list(self.stub.ModelStreamInfer(iter(reqs), timeout=10.0))
        self.assertEqual(len(answers), len(reqs))
        by_id = {a.infer_response.id: a for a in answers}
        self.assertEqual(set(by_id), {r.id for r in reqs})
        self.assertIn("nope", by_id["bad"].error_message)
        unary = self.stub.ModelInfer(self.request(sample(5)), timeout=2.0)
        s5 = by_id["s5"]
        self.assertEqual(s5.error_message, "")
        self.assertEqual(s5.infer_response.raw_output_contents[0], unary.raw_output_contents[0])


if __name__ == "__main__":
    unittest.main(verbosity=2)
