#!/usr/bin/env python3
"""A tiny OTLP/gRPC trace collector that records every byte it receives.

The driver's exporter speaks OTLP over gRPC only (opentelemetry-otlp with
`grpc-tonic`: HTTP/2 without TLS, "prior knowledge", on an
`http://127.0.0.1:PORT` endpoint), so this is a minimal HTTP/2 server on the
standard library alone: it answers every request with an empty gRPC OK
(`ExportTraceServiceResponse {}`) and writes

  OUT.raw       every byte received on every connection, as received;
  OUT.messages  the gRPC messages (the protobuf ExportTraceServiceRequests),
                reassembled from the DATA frames of each stream, without the
                frame headers that HTTP/2 puts between 16 KiB chunks (a string
                cut by a frame boundary is whole here), gzip-inflated if
                compressed; protobuf strings (span names, attributes, events)
                are plain bytes in it;
  OUT.frames    the payload of every other frame (HEADERS and CONTINUATION
                header blocks, SETTINGS, PING, GOAWAY, ...), one per line:
                with OUT.messages, every byte received but the connection
                preface and the 9-byte frame headers, so a search need not
                read OUT.raw;
  OUT.json      a summary: connections, requests, bytes.

HPACK header blocks are recorded as they are, not decoded: the exporter's
headers are its static metadata (content-type, te, user-agent, grpc-timeout),
never span data.

Usage: otlp-capture.py OUT PORT_FILE   (listens on 127.0.0.1, an ephemeral
port written to PORT_FILE once listening; stops on SIGTERM/SIGINT).
"""

import json
import os
import signal
import socket
import socketserver
import struct
import sys
import threading
import zlib

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 0x1, 0x1, 0x4, 0x8, 0x20
WINDOW = 1 << 24

# HPACK, no dynamic table, no Huffman: ":status: 200" is static entry 8;
# "content-type" (static name 31) and "grpc-status" are literals without indexing.
RESPONSE_HEADERS = b"\x88" + b"\x0f\x10" + bytes([16]) + b"application/grpc"
TRAILERS = b"\x00" + bytes([11]) + b"grpc-status" + bytes([1]) + b"0"
EMPTY_MESSAGE = b"\x00\x00\x00\x00\x00"


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


class Capture:
    def __init__(self, out):
        self.out = out
        self.lock = threading.Lock()
        self.raw = open(out + ".raw", "wb")
        self.messages = open(out + ".messages", "wb")
        self.frames = open(out + ".frames", "wb")
        self.stats = {"connections": 0, "requests": 0, "messages": 0, "raw_bytes": 0, "message_bytes": 0}

    def record_raw(self, data):
        with self.lock:
            if self.raw.closed:
                return
            self.raw.write(data)
            self.stats["raw_bytes"] += len(data)

    def record_frame(self, payload):
        with self.lock:
            if not self.frames.closed:
                self.frames.write(payload + b"\n")

    def record_request(self, body):
        """Splits a request body into gRPC messages (flag, length, message)."""
        with self.lock:
            if self.messages.closed:
                return
            self.stats["requests"] += 1
            while len(body) >= 5:
                compressed, length = body[0], struct.unpack(">I", body[1:5])[0]
                message, body = body[5 : 5 + length], body[5 + length :]
                if compressed:
                    try:
                        message = zlib.decompress(message, 47)  # gzip or zlib
                    except zlib.error:
                        pass  # unknown compression: kept as received (and in OUT.raw)
                self.messages.write(message + b"\n")
                self.stats["messages"] += 1
                self.stats["message_bytes"] += len(message)
            if body:  # a truncated message: keep its bytes too
                self.messages.write(body + b"\n")

    def close(self):
        with self.lock:
            self.raw.close()
            self.messages.close()
            self.frames.close()
            with open(self.out + ".json", "w") as f:
                json.dump(self.stats, f)


class Connection(socketserver.BaseRequestHandler):
    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.request.recv(n - len(buf))
            if not chunk:
                raise EOFError
            self.server.capture.record_raw(chunk)
            buf += chunk
        return buf

    def handle(self):
        capture = self.server.capture
        with capture.lock:
            capture.stats["connections"] += 1
        send = self.request.sendall
        try:
            if self.recv_exact(len(PREFACE)) != PREFACE:
                return
            # Our SETTINGS (initial stream window) and a larger connection window.
            send(frame(SETTINGS, 0, 0, struct.pack(">HI", 4, WINDOW)))
            send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", WINDOW - 65535)))
            bodies = {}
            while True:
                head = self.recv_exact(9)
                length = struct.unpack(">I", b"\x00" + head[:3])[0]
                kind, flags, stream = head[3], head[4], struct.unpack(">I", head[5:])[0] & 0x7FFFFFFF
                payload = self.recv_exact(length) if length else b""
                if kind != DATA:
                    capture.record_frame(payload)
                if kind == DATA:
                    data = payload
                    if flags & PADDED:
                        data = payload[1 : len(payload) - payload[0]]
                    bodies.setdefault(stream, bytearray()).extend(data)
                    if length:
                        send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", length)))
                        if not flags & END_STREAM:
                            send(frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", length)))
                    if flags & END_STREAM:
                        self.respond(stream, bytes(bodies.pop(stream, b"")))
                elif kind == HEADERS:
                    bodies.setdefault(stream, bytearray())
                    if flags & END_STREAM:
                        self.respond(stream, bytes(bodies.pop(stream, b"")))
                elif kind == RST_STREAM:
                    body = bodies.pop(stream, None)
                    if body:
                        capture.record_request(bytes(body))
                elif kind == SETTINGS and not flags & ACK:
                    send(frame(SETTINGS, ACK, 0))
                elif kind == PING and not flags & ACK:
                    send(frame(PING, ACK, 0, payload))
                elif kind == GOAWAY:
                    send(frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0)))
                    return
        except (EOFError, ConnectionError, OSError):
            return

    def respond(self, stream, body):
        self.server.capture.record_request(body)
        send = self.request.sendall
        send(frame(HEADERS, END_HEADERS, stream, RESPONSE_HEADERS))
        send(frame(DATA, 0, stream, EMPTY_MESSAGE))
        send(frame(HEADERS, END_HEADERS | END_STREAM, stream, TRAILERS))


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    out, port_file = sys.argv[1], sys.argv[2]
    server = Server(("127.0.0.1", 0), Connection)
    server.capture = Capture(out)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    stop.wait()
    server.shutdown()
    server.capture.close()


if __name__ == "__main__":
    main()
