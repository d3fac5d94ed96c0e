#!/usr/bin/python3
"""The Open Inference Protocol (KServe v2) route, with plain generated stubs
(any OIP client works the same way: tritonclient.grpc, KServe's client).

  PYTHONPATH=build/python clients/python/examples/oip_infer.py \
      --router 127.0.0.1:8500 --model fmnist
"""
import argparse

import grpc
import numpy as np

from inference import grpc_predict_v2_pb2 as pb
from inference import grpc_predict_v2_pb2_grpc as pbg

ap = argparse.ArgumentParser(description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--router", default="127.0.0.1:8500")
ap.add_argument("--model", default="fmnist")
args = ap.parse_args()

with grpc.insecure_channel(args.router) as channel:
    stub = pbg.GRPCInferenceServiceStub(channel)
    md = stub.ModelMetadata(pb.ModelMetadataRequest(name=args.model), timeout=5)
    inp = md.inputs[0]
    print(f"{md.name} v{md.versions[0]}: input {inp.name} {inp.datatype} {list(inp.shape)}, "
          f"output {md.outputs[0].name} {list(md.outputs[0].shape)}")
    shape = [1] + list(inp.shape[1:])  # one sample; the router batches
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    req = pb.ModelInferRequest(model_name=args.model, id="first")
    t = req.inputs.add(name=inp.name, datatype="FP32", shape=shape)
    req.raw_input_contents.append(x.tobytes())
    req.parameters["timeout"].int64_param = 100_000  # 100 ms, in microseconds (Triton's)
    req.parameters["superserve_details"].bool_param = True  # worker, batch size, timings
    resp = stub.ModelInfer(req, timeout=5)
    out = resp.outputs[0]
    y = np.frombuffer(resp.raw_output_contents[0], dtype="<f4").reshape(out.shape)
    p = resp.parameters
    print(f"class {int(y.argmax())}: subnet {p['superserve_subnet_id'].int64_param} "
          f"({p['superserve_accuracy'].double_param:.1f} % top-1), "
          f"batch {p['superserve_batch_size'].int64_param}, "
          f"executed {p['superserve_exec_us'].int64_param} us")
