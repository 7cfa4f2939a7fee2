// A proxy in front of the service that loses answers: it resets a
// connection before forwarding (the request never arrived), forwards and
// then resets instead of answering (the service did the work; the client
// never hears), or answers a gateway's 503 with Retry-After itself. It
// logs every request with its Idempotency-Key and what it did.

import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before } from "node:test";

/** What the proxy does with one request. */
export type Fault = "pass" | "reset" | "drop-answer" | { status: 503; retryAfter: number } | { status: 401 };

/** One request the proxy saw. */
export interface Seen {
  at: number;
  method: string;
  path: string;
  key: string | undefined;
  fault: Fault;
  /** The service's status, when the request was forwarded. */
  status?: number;
  /** When the service's answer (or the proxy's own) was sent or dropped. */
  doneAt?: number;
}

/** A running proxy. */
export interface FaultyProxy {
  url: string;
  seen: Seen[];
  /** Decides each request's fault; pass-through by default. */
  plan: (req: { method: string; path: string; n: number }) => Fault;
  close(): Promise<void>;
}

/**
 * A proxy in front of upstream for the calling test file: it listens on a
 * free loopback port before the file's tests and closes after them.
 */
export function lossyProxy(upstream: string): FaultyProxy {
  const proxy = newProxy(upstream);
  before(() => proxy.listen());
  after(() => proxy.close());
  return proxy;
}

function newProxy(upstream: string): FaultyProxy & { listen(): Promise<void> } {
  const target = new URL(upstream);
  const agent = new http.Agent({ keepAlive: true });
  const proxy: FaultyProxy & { listen(): Promise<void> } = {
    url: "",
    seen: [],
    plan: () => "pass",
    listen: async () => {
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
        agent.destroy();
      }),
  };
  const server = http.createServer((req, res) => {
    const path = req.url ?? "/";
    const key = req.headers["idempotency-key"];
    const seen: Seen = { at: Date.now(), method: req.method ?? "GET", path, key: typeof key === "string" ? key : undefined, fault: "pass" };
    seen.fault = proxy.plan({ method: seen.method, path, n: proxy.seen.length });
    proxy.seen.push(seen);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const f = seen.fault;
      if (f === "reset") {
        seen.doneAt = Date.now();
        req.socket.resetAndDestroy();
        return;
      }
      if (typeof f === "object") {
        const body = JSON.stringify(
          f.status === 503
            ? { type: "service-unavailable", title: "Service Unavailable", status: 503, detail: "the gateway is shedding load" }
            : { type: "unauthorized", title: "Unauthorized", status: 401, detail: "session revoked" },
        );
        const headers: http.OutgoingHttpHeaders = { "Content-Type": "application/problem+json" };
        if (f.status === 503) headers["Retry-After"] = String(f.retryAfter);
        seen.doneAt = Date.now();
        res.writeHead(f.status, headers).end(body);
        return;
      }
      const up = http.request(
        { host: target.hostname, port: target.port, method: req.method, path, headers: { ...req.headers, host: target.host }, agent },
        (upRes) => {
          const body: Buffer[] = [];
          upRes.on("data", (c: Buffer) => body.push(c));
          upRes.on("end", () => {
            seen.status = upRes.statusCode;
            seen.doneAt = Date.now();
            if (f === "drop-answer") {
              req.socket.resetAndDestroy();
              return;
            }
            res.writeHead(upRes.statusCode ?? 502, upRes.headers).end(Buffer.concat(body));
          });
        },
      );
      up.on("error", () => req.socket.resetAndDestroy());
      up.end(Buffer.concat(chunks));
    });
  });
  return proxy;
}
