// Transports: how a request leaves the device. The SDK speaks to one
// function, so wx.request in a mini-program and fetch elsewhere (tests,
// a web view, Node) are interchangeable.

/** One HTTP exchange the SDK asks a transport to make. */
export interface HttpRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  /** The JSON body, already encoded. */
  body?: string;
  /** How long this attempt may take before the transport gives up. */
  timeoutMs: number;
}

/** The answer as the transport read it. */
export interface HttpResponse {
  status: number;
  /** A response header by name, case-insensitively; undefined when absent. */
  header(name: string): string | undefined;
  /** The body as text ("" when there is none). */
  body: string;
}

/**
 * A transport sends one request and resolves with whatever status came
 * back. It rejects only when no answer arrived (a reset, a timeout, no
 * network), with a {@link NetworkError}: the request may or may not have
 * reached the service, which is why every retried call carries the same
 * Idempotency-Key.
 */
export type Transport = (req: HttpRequest) => Promise<HttpResponse>;

/** No answer arrived: the outcome on the server is unknown. */
export class NetworkError extends Error {
  override readonly name = "NetworkError";
  constructor(
    message: string,
    /** What the transport threw or reported. */
    readonly underlying?: unknown,
  ) {
    super(message);
  }
}

/** The answer of a fetch, as far as the fetch transport reads it. */
export interface FetchResponseLike {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}

/**
 * A fetch implementation (the runtime's `fetch`). Its init is whatever
 * that runtime's type is: the transport passes `{method, headers, body,
 * signal}`, which every fetch takes, without the library depending on
 * DOM or Node types for it.
 */
export type FetchLike<Init> = (url: string, init: Init) => Promise<FetchResponseLike>;

/** An AbortController's signal, as fetch takes it. */
export interface AbortSignalLike {
  readonly aborted: boolean;
}

/** The parts of AbortController the fetch transport uses for timeouts. */
interface AbortControllerLike {
  readonly signal: AbortSignalLike;
  abort(): void;
}

declare const AbortController: { new (): AbortControllerLike } | undefined;

/** A transport over fetch (Node 18+, browsers, web views). */
export function fetchTransport<Init>(fetchImpl: FetchLike<Init>): Transport {
  return async (req) => {
    const ctl = typeof AbortController === "function" ? new AbortController() : undefined;
    const timer = ctl ? setTimeout(() => ctl.abort(), req.timeoutMs) : undefined;
    try {
      const init = { method: req.method, headers: req.headers, body: req.body, signal: ctl?.signal };
      const res = await fetchImpl(req.url, init as unknown as Init);
      const body = await res.text();
      return { status: res.status, header: (n) => res.headers.get(n) ?? undefined, body };
    } catch (err) {
      throw new NetworkError(`${req.method} ${req.url}: ${describe(err)}`, err);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  };
}

/** The options of wx.request the wx transport sets. */
export interface WxRequestOptions {
  url: string;
  method: "GET" | "POST" | "PUT" | "DELETE";
  header: Record<string, string>;
  data?: string;
  timeout: number;
  dataType: string;
  responseType: "text";
  success(res: { statusCode: number; header: Record<string, unknown> | object; data: unknown }): void;
  fail(err: { errMsg: string }): void;
}

/** The part of the mini-program's `wx` the wx transport uses. */
export interface WxRequestApi {
  request(options: WxRequestOptions): unknown;
}

/**
 * A transport over wx.request. The body is read as text (dataType other
 * than "json") so that problem documents and JSON answers are parsed in
 * one place, and header names are matched case-insensitively (the
 * platforms differ in how they spell them).
 */
export function wxTransport(wx: WxRequestApi): Transport {
  return (req) =>
    new Promise<HttpResponse>((resolve, reject) => {
      wx.request({
        url: req.url,
        method: req.method as WxRequestOptions["method"],
        header: req.headers,
        data: req.body,
        timeout: req.timeoutMs,
        dataType: "text",
        responseType: "text",
        success: (res) => {
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.header as Record<string, unknown>)) headers[k.toLowerCase()] = String(v);
          resolve({
            status: res.statusCode,
            header: (n) => headers[n.toLowerCase()],
            body: typeof res.data === "string" ? res.data : JSON.stringify(res.data ?? ""),
          });
        },
        fail: (err) => reject(new NetworkError(`${req.method} ${req.url}: ${err.errMsg}`, err)),
      });
    });
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}
