#!/usr/bin/env python3
"""An example tool provider for Plexus's ipc transport, in Python 3 with
the standard library only.

Plexus launches it, it connects back over the unix socket, says
agent.hello with its session token, registers three tools and serves their
calls, with heartbeats, streaming and cancellation (the OpenSentience
runtime protocol v1):

    echo         read   returns {"echo": <input>}
    count        read   streams "line 1" ... "line n" on stdout, one every
                        interval_ms (default 100), then returns {"count": n}
    note.append  write  appends {"text"} as a line to $NOTES_DIR/notes.md
                        (side_effects: true), returns {"path", "bytes"}

Declare it to Plexus:

    plexus providers add demo-py -- python3 /abs/path/to/provider.py

and set NOTES_DIR in its "env" in PLEXUS_HOME/providers.json.

It reads PLEXUS_SOCKET, PLEXUS_SESSION_TOKEN and PLEXUS_PROVIDER_ID from its
environment and never prints the token. It exits when Plexus says
core.goodbye or closes the connection.
"""

import datetime
import json
import os
import socket
import struct
import sys
import threading
import time

VERSION = "1.0.0"
DEFAULT_MAX_FRAME = 4 * 1024 * 1024


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ToolError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Provider:
    def __init__(self, sock, provider_id):
        self.sock = sock
        self.id = provider_id
        self.max = DEFAULT_MAX_FRAME
        self.started = time.monotonic()
        self.wlock = threading.Lock()  # one frame at a time on the socket
        self.seq = 0
        self.rlock = threading.Lock()  # guards running
        self.running = {}  # call_id -> threading.Event set on cancel
        self.done = threading.Event()

    # --- framing (§2): 4-byte big-endian length + one UTF-8 JSON object ---

    def write(self, typ, payload, reply_to=None):
        with self.wlock:
            self.seq += 1
            env = {"v": 1, "type": typ, "id": "%s-%d" % (self.id, self.seq), "ts": now(), "payload": payload}
            if reply_to is not None:
                # §3.1: echo the ids of the request being handled.
                for k in ("request_id", "correlation_id", "causation_id"):
                    if reply_to.get(k):
                        env[k] = reply_to[k]
            data = json.dumps(env, separators=(",", ":")).encode("utf-8")
            if len(data) > self.max:
                raise ValueError("frame of %d bytes over the limit" % len(data))
            self.sock.sendall(struct.pack(">I", len(data)) + data)

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf.extend(chunk)
        return bytes(buf)

    def read(self):
        hdr = self.recv_exact(4)
        if hdr is None:
            return None
        (n,) = struct.unpack(">I", hdr)
        if n == 0 or n > self.max:
            raise ValueError("bad frame length %d" % n)
        body = self.recv_exact(n)
        if body is None:
            return None
        return json.loads(body.decode("utf-8"))

    # --- the session ---

    def tools(self):
        return [
            {"tool_id": self.id + "/echo", "name": "echo", "description": "Returns its input.",
             "input_schema": {"type": "object"}},
            {"tool_id": self.id + "/count", "name": "count",
             "description": "Counts to n, streaming one line per step.",
             "input_schema": {"type": "object", "properties": {
                 "n": {"type": "integer", "minimum": 1, "maximum": 1000},
                 "interval_ms": {"type": "integer", "minimum": 0, "maximum": 5000}}, "required": ["n"]},
             "output_schema": {"type": "object", "properties": {"count": {"type": "integer"}}},
             "capabilities": ["streaming", "cancellation"]},
            {"tool_id": self.id + "/note.append", "name": "note.append",
             "description": "Appends a line to notes.md in the notes folder.",
             "input_schema": {"type": "object", "properties": {"text": {"type": "string", "maxLength": 10000}},
                              "required": ["text"], "additionalProperties": False},
             "side_effects": True},
        ]

    def heartbeats(self, session_id, every):
        while not self.done.is_set():
            with self.rlock:
                inflight = len(self.running)
            try:
                self.write("agent.heartbeat", {"session_id": session_id, "status": "ok", "inflight_calls": inflight,
                                               "uptime_ms": int((time.monotonic() - self.started) * 1000)})
            except OSError:
                return
            self.done.wait(every)

    def serve(self, env, call, canceled):
        started = now()
        result = {"call_id": call["call_id"], "status": "succeeded", "started_at": started}
        name = call.get("tool_id", "")[len(self.id) + 1:]
        args = call.get("input") or {}
        try:
            if name == "echo":
                out = {"echo": args}
            elif name == "count":
                out = self.count(env, call["call_id"], args, canceled)
            elif name == "note.append":
                out = append_note(args)
            else:
                raise ToolError("tool.unknown", "no such tool")
            if canceled.is_set():
                raise ToolError("tool.canceled", "canceled")
            result["output"] = out
        except ToolError as e:
            result["status"] = "canceled" if e.code == "tool.canceled" else "failed"
            result["error"] = {"code": e.code, "message": str(e)}
        except Exception as e:  # a tool's own failure, reported safely
            result["status"] = "failed"
            result["error"] = {"code": "tool.failed", "message": type(e).__name__}
        finally:
            with self.rlock:
                self.running.pop(call["call_id"], None)
        result["finished_at"] = now()
        try:
            self.write("agent.tool.result", result, reply_to=env)
        except OSError:
            pass

    def count(self, env, call_id, args, canceled):
        n = args.get("n")
        if not isinstance(n, int) or not 1 <= n <= 1000:
            raise ToolError("tool.invalid_input", "n must be 1 to 1000")
        interval = args.get("interval_ms", 100)
        if not isinstance(interval, int) or not 0 <= interval <= 5000:
            interval = 100
        for i in range(1, n + 1):
            if i > 1 and canceled.wait(interval / 1000.0):
                raise ToolError("tool.canceled", "canceled")
            if canceled.is_set():
                raise ToolError("tool.canceled", "canceled")
            self.write("agent.tool.stream", {"call_id": call_id, "seq": i, "channel": "stdout",
                                             "data": {"text": "line %d" % i}, "done": i == n}, reply_to=env)
        return {"count": n}

    def run(self, token):
        self.write("agent.hello", {
            "session_token": token, "agent_id": self.id, "agent_version": VERSION,
            "protocol": {"supported_versions": [1], "capabilities": ["tools", "streaming", "cancellation"]},
            "sdk": {"name": "plexus-example-python", "version": VERSION}})
        welcome = self.read()
        if welcome is None:
            return 1
        if welcome.get("error"):
            print("pyprovider: refused: %s" % welcome["error"].get("code"), file=sys.stderr)
            return 1
        w = welcome["payload"]
        self.max = w.get("max_frame_bytes", DEFAULT_MAX_FRAME)
        every = max(w.get("heartbeat_interval_ms", 5000), 10) / 1000.0
        threading.Thread(target=self.heartbeats, args=(w["session_id"], every), daemon=True).start()
        self.write("agent.tools.register", {"tools": self.tools()})
        try:
            while True:
                env = self.read()
                if env is None:
                    return 0  # Plexus closed the connection
                typ, payload = env.get("type"), env.get("payload") or {}
                if typ == "core.tool.call":
                    canceled = threading.Event()
                    with self.rlock:
                        self.running[payload["call_id"]] = canceled
                    threading.Thread(target=self.serve, args=(env, payload, canceled), daemon=True).start()
                elif typ == "core.tool.cancel":
                    with self.rlock:
                        ev = self.running.get(payload.get("call_id"))
                    if ev is not None:
                        ev.set()
                    self.write("agent.tool.cancel_ack", {"call_id": payload.get("call_id"), "accepted": ev is not None})
                elif typ == "core.tools.registered":
                    for r in payload.get("rejected") or []:
                        print("pyprovider: tool %s rejected: %s" % (r.get("tool_id"), r.get("error", {}).get("message")),
                              file=sys.stderr)
                elif typ == "core.goodbye":
                    return 0
        finally:
            self.done.set()
            with self.rlock:
                for ev in self.running.values():
                    ev.set()


def append_note(args):
    text = args.get("text")
    if not isinstance(text, str):
        raise ToolError("tool.invalid_input", "text must be a string")
    folder = os.environ.get("NOTES_DIR")
    if not folder:
        raise ToolError("tool.not_configured", "NOTES_DIR is not set in the provider's env")
    line = text + "\n"
    with open(os.path.join(folder, "notes.md"), "a", encoding="utf-8") as f:
        f.write(line)
    return {"path": "notes.md", "bytes": len(line.encode("utf-8"))}


def main():
    sock_path = os.environ.get("PLEXUS_SOCKET")
    token = os.environ.get("PLEXUS_SESSION_TOKEN")
    provider_id = os.environ.get("PLEXUS_PROVIDER_ID")
    if not (sock_path and token and provider_id):
        print("pyprovider: PLEXUS_SOCKET, PLEXUS_SESSION_TOKEN and PLEXUS_PROVIDER_ID must be set "
              "(Plexus sets them when it launches a provider)", file=sys.stderr)
        return 1
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    try:
        return Provider(s, provider_id).run(token)
    finally:
        s.close()


if __name__ == "__main__":
    sys.exit(main())
