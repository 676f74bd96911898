#!/usr/bin/env python3
"""gRPC micro-benchmarks after OSU's TF-gRPC-Bench: latency, bandwidth, parameter-server throughput.

Distributed TensorFlow moves tensors over gRPC, each message a payload of several
buffers (iovecs) whose sizes follow a pattern. This measures the same path from
Python (the images' grpcio), over message sizes and the three payload shapes of
TF-gRPC-Bench: uniform (equal buffers), random (random cut points) and skew (one
large buffer, the rest a few bytes each), each in two modes: serialized (the
buffers in a protobuf message, encoded and decoded on every hop, as tensors in
TensorFlow's RPCs are) and non-serialized (the buffers as one raw byte string).
- point-to-point: rank 0 calls Echo on rank 1's server (with one rank, its own):
  latency is half the round trip, bandwidth bytes over that one-way time, as in
  the MPI sweep, so the two tables read together;
- parameter server: the first --servers ranks host a server, every rank is a
  worker that pushes a payload to each server and pulls one back; throughput is
  the bytes moved by all workers over the slowest worker's time.
Ranks meet and agree on repetitions through MPI (mpi4py); every byte measured goes
over gRPC (TCP). Rank 0 prints one kit.bench/2 record. Depends on grpcio, protobuf
and mpi4py (in the horovod images).
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import argparse
import os
import random
import socket
import struct
import sys
import time
from concurrent import futures

import kitbench
from mpi_bench import sizes  # the same --min-bytes, --max-bytes, --factor sweep

SCHEMES = ("uniform", "random", "skew")
MODES = ("serialized", "non-serialized")
BUFFERS = 8  # iovec buffers per payload (fewer when the payload has fewer bytes)
UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-bytes", type=int, default=8, help="smallest payload (bytes)")
    p.add_argument("--max-bytes", type=int, default=4 << 20, help="largest payload (bytes)")
    p.add_argument("--factor", type=int, default=8, help="size step: each size factor x the last")
    p.add_argument(
        "--time-per-size", type=float, default=0.05, help="seconds of timed calls per point"
    )
    p.add_argument("--servers", type=int, default=1, help="parameter-server ranks (first ranks)")
    p.add_argument("--payloads", default=",".join(SCHEMES), help="payload shapes to run")
    p.add_argument("--modes", default=",".join(MODES), help="modes to run")
    p.add_argument("--launch-time", type=float, default=None, help="epoch seconds at launch")
    a = p.parse_args(argv)
    if a.min_bytes < BUFFERS:
        p.error(f"--min-bytes must be at least {BUFFERS} (got {a.min_bytes})")
    if a.max_bytes < a.min_bytes:
        p.error(f"--max-bytes ({a.max_bytes}) must be at least --min-bytes ({a.min_bytes})")
    if a.factor < 2:
        p.error(f"--factor must be at least 2 (got {a.factor})")
    if a.time_per_size <= 0:
        p.error(f"--time-per-size must be positive (got {a.time_per_size})")
    if a.servers < 1:
        p.error(f"--servers must be at least 1 (got {a.servers})")
    a.payloads = [x for x in a.payloads.split(",") if x]
    a.modes = [x for x in a.modes.split(",") if x]
    for given, known, flag in ((a.payloads, SCHEMES, "--payloads"), (a.modes, MODES, "--modes")):
        bad = [x for x in given if x not in known]
        if bad or not given:
            p.error(f"{flag} takes {', '.join(known)} (got {', '.join(bad) or 'nothing'})")
    return a


def split(total: int, scheme: str, rng: random.Random) -> list[int]:
    """The buffer sizes one payload of `total` bytes is cut into."""
    n = min(BUFFERS, total)
    if scheme == "uniform":
        cuts = [total * i // n for i in range(1, n)]
    elif scheme == "random":
        cuts = sorted(rng.sample(range(1, total), n - 1))
    else:  # skew: one buffer holds nearly everything
        small = max(1, total // (64 * n))
        cuts = [total - small * (n - 1 - i) for i in range(n - 1)]
    edges = [0, *cuts, total]
    return [edges[i + 1] - edges[i] for i in range(n)]


def payload_type():
    """`message Payload { repeated bytes buffers = 1; }`, built at run time (no generated
    code): the serialized mode's wire format."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name="kit_grpc_bench.proto", package="kit")
    message = proto.message_type.add(name="Payload")
    message.field.add(
        name="buffers",
        number=1,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("kit.Payload"))


class Codec:
    """Payloads for one mode: what goes on the wire and how each side reads it."""

    def __init__(self, mode: str, payload) -> None:
        self.mode = mode
        self.payload = payload

    def make(self, buffers: list[bytes]):
        return self.payload(buffers=buffers) if self.mode == "serialized" else b"".join(buffers)

    def encode(self, value) -> bytes:
        return value.SerializeToString() if self.mode == "serialized" else value

    def decode(self, data: bytes):
        return self.payload.FromString(data) if self.mode == "serialized" else data


def serve(grpc, codecs: dict[str, Codec], pulls: dict):
    """The methods of one rank's server: Echo (payload back), Push (empty reply) and Pull
    (the payload registered for the size asked), for each mode."""
    handlers = {}
    for mode, c in codecs.items():
        handlers[f"Echo.{mode}"] = grpc.unary_unary_rpc_method_handler(
            lambda msg, ctx: msg, request_deserializer=c.decode, response_serializer=c.encode
        )
        handlers[f"Push.{mode}"] = grpc.unary_unary_rpc_method_handler(
            lambda msg, ctx: b"", request_deserializer=c.decode
        )
        handlers[f"Pull.{mode}"] = grpc.unary_unary_rpc_method_handler(
            lambda key, ctx, mode=mode: pulls[(mode, struct.unpack("<Q", key)[0])],
            response_serializer=c.encode,
        )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=UNLIMITED)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("kit.Bench", handlers)])
    port = server.add_insecure_port("[::]:0")
    server.start()
    return server, port


def stubs(grpc, channel, codecs: dict[str, Codec]) -> dict[tuple[str, str], object]:
    out = {}
    for mode, c in codecs.items():
        out[("Echo", mode)] = channel.unary_unary(
            f"/kit.Bench/Echo.{mode}", request_serializer=c.encode, response_deserializer=c.decode
        )
        out[("Push", mode)] = channel.unary_unary(
            f"/kit.Bench/Push.{mode}", request_serializer=c.encode
        )
        out[("Pull", mode)] = channel.unary_unary(
            f"/kit.Bench/Pull.{mode}", response_deserializer=c.decode
        )
    return out


def iterations(comm, once, budget: float) -> int:
    """Repetitions filling about `budget` seconds, agreed by all ranks (rank 0's estimate)."""
    for _ in range(2):  # warm-up: connections, buffers
        once()
    comm.Barrier()
    t0 = time.perf_counter()
    once()
    guess = max(3, min(20000, int(budget / max(time.perf_counter() - t0, 1e-7))))
    comm.Barrier()  # see timed()
    return comm.bcast(guess, root=0)


def timed(comm, once, budget: float) -> tuple[int, float]:
    """(repetitions, the slowest rank's time for them)."""
    from mpi4py import MPI

    n = iterations(comm, once, budget)
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        once()
    took = time.perf_counter() - t0
    # Wait in Barrier, which lets go of the GIL: a rank whose server is still answering
    # the others' calls must not sit in a pickled collective, which holds it.
    comm.Barrier()
    return n, comm.allreduce(took, MPI.MAX)


def main(argv: list[str] | None = None) -> int:
    t_start = time.time()
    a = parse_args(argv)
    launch = a.launch_time or t_start
    mpi = kitbench.mpi_library()
    if mpi == "none":
        print("grpc_bench: needs mpi4py to meet the other ranks", file=sys.stderr)
        return 2
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # no INFO lines on connection ends
    import grpc

    comm = kitbench.mpi_comm()
    rank, size = comm.Get_rank(), comm.Get_size()
    servers = min(a.servers, size)
    payload = payload_type()
    codecs = {m: Codec(m, payload) for m in a.modes}
    rng = random.Random(1234)
    shapes = {
        (scheme, n): [bytes(k) for k in split(n, scheme, rng)]
        for scheme in a.payloads
        for n in sizes(a)
    }
    pulls: dict = {}
    server, port = serve(grpc, codecs, pulls)
    host = socket.gethostname()
    everyone = comm.allgather((host, port))
    one_host = len({h for h, _ in everyone}) == 1
    address = [f"{'localhost' if one_host else h}:{p}" for h, p in everyone]
    channels = [grpc.insecure_channel(x, options=UNLIMITED) for x in address]
    calls = [stubs(grpc, ch, codecs) for ch in channels]
    peer = calls[1 if size > 1 else 0]
    p2p, ps, startup = [], [], None
    for mode, c in codecs.items():
        for scheme in a.payloads:
            for n in sizes(a):
                msg = c.make(shapes[(scheme, n)])
                pulls[(mode, n)] = msg  # what Pull returns (every rank serves the same)
                key = struct.pack("<Q", n)
                echo = peer[("Echo", mode)]
                reps, took = timed(comm, lambda e=echo, m=msg: rank == 0 and e(m), a.time_per_size)
                if startup is None:
                    startup = time.time() - launch
                one_way = took / reps / 2
                p2p.append(
                    {
                        **{"payload": scheme, "mode": mode, "bytes": n, "iterations": reps},
                        **{"latency_us": one_way * 1e6, "bandwidth_mb_s": n / one_way / 1e6},
                    }
                )

                def push_pull(mode=mode, msg=msg, key=key) -> None:
                    for s in range(servers):
                        calls[s][("Push", mode)](msg)
                        calls[s][("Pull", mode)](key)

                reps, took = timed(comm, push_pull, a.time_per_size)
                moved = 2 * n * servers * reps * size
                ps.append(
                    {
                        **{"payload": scheme, "mode": mode, "bytes": n, "iterations": reps},
                        "throughput_mb_s": moved / took / 1e6,
                    }
                )
    hosts = sorted(set(comm.gather(host, root=0) or []))
    startups = comm.gather(startup, root=0)
    # while the channels are open: the transport is read from rank 0's connections
    head = kitbench.header("grpc", "ok", "grpcio", grpc.__version__, mpi, hosts, size)
    for ch in channels:
        ch.close()
    comm.Barrier()  # nobody calls any server now
    server.stop(None)
    if rank == 0:
        kitbench.emit(
            {
                **head,
                "startup_s": max(startups),
                "servers": servers,
                "buffers": BUFFERS,
                "p2p": p2p,
                "ps": ps,
            }
        )
    kitbench.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
