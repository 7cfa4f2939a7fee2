// The client: typed calls of the customer's API, each sent through one
// loop that logs in when needed, carries the intent's Idempotency-Key,
// retries what may be retried and stops at the deadline.

import { type PendingIntent, IntentStore, type RandomBytes, defaultRandomBytes, uuidV4 } from "./intents.js";
import type { components, operations } from "./openapi.js";
import { GaveUpError, ProblemError, parseProblem } from "./problem.js";
import { type RetryPolicy, defaultRetryPolicy, isRetryable, retryAfterMs, retryDelayMs } from "./retry.js";
import type { KeyValueStorage } from "./storage.js";
import { NetworkError, type Transport } from "./transport.js";

type Schemas = components["schemas"];
type JSONOf<R> = R extends { content: { "application/json": infer B } } ? B : never;
/** The JSON answer of an operation's success status. */
export type Answer<K extends keyof operations, S extends number = 200> = JSONOf<operations[K]["responses"][S & keyof operations[K]["responses"]]>;
/** The JSON request body of an operation. */
export type RequestBody<K extends keyof operations> = operations[K] extends { requestBody: { content: { "application/json": infer B } } }
  ? B
  : operations[K] extends { requestBody?: { content: { "application/json": infer B } } }
    ? B
    : never;
/** A query parameter set of an operation. */
export type Query<K extends keyof operations> = NonNullable<operations[K]["parameters"]["query"]>;

/** An order as the service shows it. */
export type Order = Schemas["Order"];
/** A priced cart and the token that places it. */
export type Confirmation = Schemas["Confirmation"];
/** The body of a confirm: the cart. */
export type Cart = RequestBody<"confirmOrder">;
/** The parameters of wx.requestPayment. */
export type PaymentParams = Answer<"payOrder">;
/** An order's status. */
export type OrderStatus = Order["status"];

/** The outcome of placing an order. */
export interface Placed {
  order: Schemas["PlacedOrder"];
  /** The service answered a retry of this key with the first answer (`Idempotent-Replayed`). */
  replayed: boolean;
  /** The token had been placed already under another key: this is that order. */
  duplicate: boolean;
}

/** The session the service issued at login. */
export interface Session {
  token: string;
  expires_at: string;
  user_id: string;
}

/** What a client needs. */
export interface ClientOptions {
  /** The service's base URL, e.g. https://api.example.com (no trailing slash needed). */
  baseUrl: string;
  /** How requests leave: wxTransport(wx) in a mini-program, fetchTransport(fetch) elsewhere. */
  transport: Transport;
  /** Where the session and pending intents are kept: wxStorage(wx) in a mini-program. */
  storage: KeyValueStorage;
  /** A fresh login code (wx.login's `code`) each time it is called. */
  loginCode: () => Promise<string>;
  /** Retry and timeout settings; the defaults fit a customer waiting on a page. */
  retry?: Partial<RetryPolicy>;
  /** Key randomness (16 bytes a call); the runtime's crypto when it has one. */
  randomBytes?: RandomBytes;
  /** Seen before every wait between attempts: for logs and metrics. */
  onRetry?: (info: RetryInfo) => void;
  /** The clock (ms), for tests. */
  now?: () => number;
  /** Jitter's random source in [0, 1), for tests. */
  random?: () => number;
  /** Sleeps ms, for tests; setTimeout by default. */
  sleep?: (ms: number) => Promise<void>;
}

/** A failed attempt the SDK will try again. */
export interface RetryInfo {
  method: string;
  path: string;
  attempt: number;
  /** The wait before the next attempt (ms). */
  delayMs: number;
  /** The service's Retry-After (ms), when it sent one. */
  retryAfterMs?: number;
  /** The status of the failed attempt; undefined when no answer arrived. */
  status?: number;
  idempotencyKey?: string;
}

/** Per-call options. */
export interface CallOptions {
  /** Set when the caller no longer wants the answer (the page was left): no further attempt is made. */
  signal?: { readonly aborted: boolean };
}

/** One call as the loop sends it. */
interface Call {
  method: string;
  path: string;
  body?: string;
  /** Sends the user's session token (logs in first when there is none). */
  auth: boolean;
  idempotencyKey?: string;
  signal?: CallOptions["signal"];
}

/** An answer of 2xx, read. */
interface Answered {
  status: number;
  header(name: string): string | undefined;
  json: unknown;
}

const sessionKey = "takeout:session";
/** A session this close to its expiry is renewed before use rather than sent. */
const sessionMarginMs = 60_000;

/** The takeout API for a customer's mini-program. */
export class TakeoutClient {
  private readonly base: string;
  private readonly policy: RetryPolicy;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly intents: IntentStore;
  private login?: Promise<Session>;

  constructor(private readonly o: ClientOptions) {
    this.base = o.baseUrl.replace(/\/+$/, "");
    this.policy = { ...defaultRetryPolicy, ...o.retry };
    this.now = o.now ?? Date.now;
    this.random = o.random ?? Math.random;
    this.sleep = o.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    const bytes = o.randomBytes ?? defaultRandomBytes();
    this.intents = new IntentStore(o.storage, () => uuidV4(bytes()), this.now);
  }

  // --- session ---

  /** The stored session, if any and not about to expire. */
  session(): Session | undefined {
    const raw = this.o.storage.get(sessionKey);
    if (!raw) return undefined;
    try {
      const s = JSON.parse(raw) as Session;
      return Date.parse(s.expires_at) - sessionMarginMs > this.now() ? s : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Logs in with a fresh wx.login code. Calls made meanwhile share this
   * login. Each attempt takes a new code: WeChat takes a code once, so a
   * code whose answer was lost is spent.
   */
  signIn(opts?: CallOptions): Promise<Session> {
    if (!this.login) {
      this.login = this.loginLoop(opts).finally(() => {
        this.login = undefined;
      });
    }
    return this.login;
  }

  private async loginLoop(opts?: CallOptions): Promise<Session> {
    // A rejected code is tried once more with a new one (the first may
    // have been spent by an attempt whose answer was lost).
    let codeRefused = false;
    for (;;) {
      const code = await this.o.loginCode();
      try {
        const r = await this.send({ method: "POST", path: "/v1/auth/wx-login", body: JSON.stringify({ code }), auth: false, signal: opts?.signal });
        const s = r.json as Session;
        this.o.storage.set(sessionKey, JSON.stringify(s));
        return s;
      } catch (err) {
        if (err instanceof ProblemError && err.type === "login-failed" && !codeRefused) {
          codeRefused = true;
          continue;
        }
        throw err;
      }
    }
  }

  /** Logs out: the service revokes the token; the stored session is dropped either way. */
  async signOut(opts?: CallOptions): Promise<void> {
    const s = this.session();
    this.o.storage.remove(sessionKey);
    if (!s) return;
    await this.send({ method: "POST", path: "/v1/auth/logout", auth: false, signal: opts?.signal }, s.token).catch((err: unknown) => {
      if (!(err instanceof ProblemError && err.status === 401)) throw err;
    });
  }

  // --- catalog ---

  /** The merchants. */
  async merchants(opts?: CallOptions): Promise<Answer<"listMerchants">> {
    return (await this.get("/v1/merchants", false, opts)) as Answer<"listMerchants">;
  }

  /** A merchant's menu. */
  async menu(merchantId: string, opts?: CallOptions): Promise<Answer<"getMenu">> {
    return (await this.get(`/v1/merchants/${seg(merchantId)}/menu`, false, opts)) as Answer<"getMenu">;
  }

  /** A merchant's time slots for scheduled orders. */
  async slots(merchantId: string, opts?: CallOptions): Promise<Answer<"listSlots">> {
    return (await this.get(`/v1/merchants/${seg(merchantId)}/slots`, false, opts)) as Answer<"listSlots">;
  }

  // --- orders ---

  /**
   * Prices a cart and returns the token that places it. Writes nothing,
   * so it is retried freely. `duplicate: true` means this cart was placed
   * a moment ago: show that order (or confirm again with `repeat: true`).
   */
  async confirm(cart: Cart, opts?: CallOptions): Promise<Confirmation> {
    return (await this.send({ method: "POST", path: "/v1/orders/confirm", body: JSON.stringify(cart), auth: true, signal: opts?.signal })).json as Confirmation;
  }

  /**
   * Places the order of a confirmation, exactly once. The key is made the
   * first time this confirmation is placed and stored before the first
   * attempt; a second tap, every retry and {@link resumePending} after a
   * restart send the same key. The key is forgotten when the service has
   * placed the order or refused it; when the SDK gives up first
   * ({@link GaveUpError}), it stays for the next try.
   */
  async placeOrder(confirmation: Pick<Confirmation, "confirm_token" | "digest">, opts?: CallOptions): Promise<Placed> {
    const intent = this.intents.open(`order:${confirmation.digest}`, "POST", "/v1/orders", JSON.stringify({ confirm_token: confirmation.confirm_token }));
    return this.placeIntent(intent, opts);
  }

  /** The intents not yet settled: orders (`order:`), payments (`pay:`) and the rest, oldest first. */
  pendingIntents(prefix = ""): PendingIntent[] {
    return this.intents.pending(prefix);
  }

  /**
   * Sends every pending order again with its own key: call it when the
   * mini-program starts (onLaunch) or shows the order page. Each answers
   * the order the service placed for it (a replay), or the refusal.
   */
  async resumePending(opts?: CallOptions): Promise<Array<{ intent: PendingIntent; placed?: Placed; error?: unknown }>> {
    const out: Array<{ intent: PendingIntent; placed?: Placed; error?: unknown }> = [];
    for (const intent of this.intents.pending("order:")) {
      try {
        out.push({ intent, placed: await this.placeIntent(intent, opts) });
      } catch (error) {
        out.push({ intent, error });
      }
    }
    return out;
  }

  private async placeIntent(intent: PendingIntent, opts?: CallOptions): Promise<Placed> {
    const r = await this.intentCall(intent, opts);
    const order = r.json as Schemas["PlacedOrder"];
    return { order, replayed: r.header("Idempotent-Replayed") === "true", duplicate: order.duplicate };
  }

  /** One of the customer's orders. */
  async order(id: string, opts?: CallOptions): Promise<Order> {
    return (await this.get(`/v1/orders/${seg(id)}`, true, opts)) as Order;
  }

  /** A page of the customer's orders, newest first. */
  async orders(query: Query<"listOrders"> = {}, opts?: CallOptions): Promise<Answer<"listOrders">> {
    return (await this.get(`/v1/orders${qs(query)}`, true, opts)) as Answer<"listOrders">;
  }

  /**
   * Polls the order until done(order) holds or the deadline passes: after
   * wx.requestPayment succeeds the order is paid once WeChat's
   * notification has reached the service, a moment later.
   */
  async waitForOrder(id: string, done: (o: Order) => boolean, opts?: CallOptions & { intervalMs?: number; timeoutMs?: number }): Promise<Order> {
    const until = this.now() + (opts?.timeoutMs ?? this.policy.deadlineMs);
    for (;;) {
      const o = await this.order(id, opts);
      if (done(o)) return o;
      if (this.now() >= until || opts?.signal?.aborted) throw new GaveUpError(`order ${id} is still ${o.status}`, undefined, 0);
      await this.sleep(opts?.intervalMs ?? 1000);
    }
  }

  /** The parameters of wx.requestPayment for a pending order (the same prepay while it lives). */
  async pay(orderId: string, opts?: CallOptions): Promise<PaymentParams> {
    return (await this.intentCall(this.intents.open(`pay:${orderId}`, "POST", `/v1/orders/${seg(orderId)}/pay`), opts)).json as PaymentParams;
  }

  /** Cancels an order (refunded when it was paid and not yet accepted). */
  async cancel(orderId: string, opts?: CallOptions): Promise<Order> {
    return (await this.intentCall(this.intents.open(`cancel:${orderId}`, "POST", `/v1/orders/${seg(orderId)}/cancel`), opts)).json as Order;
  }

  /** Confirms receipt of a delivered order. */
  async confirmReceipt(orderId: string, opts?: CallOptions): Promise<Order> {
    return (await this.intentCall(this.intents.open(`complete:${orderId}`, "POST", `/v1/orders/${seg(orderId)}/complete`), opts)).json as Order;
  }

  /** A new cart from a past order, priced now. */
  async reorder(orderId: string, body: RequestBody<"reorder">, opts?: CallOptions): Promise<Answer<"reorder">> {
    return (await this.send({ method: "POST", path: `/v1/orders/${seg(orderId)}/reorder`, body: JSON.stringify(body), auth: true, signal: opts?.signal })).json as Answer<"reorder">;
  }

  /** Urges the merchant about a late order. */
  async urge(orderId: string, opts?: CallOptions): Promise<Answer<"urgeOrder">> {
    return (await this.intentCall(this.intents.open(`urge:${orderId}`, "POST", `/v1/orders/${seg(orderId)}/urge`), opts)).json as Answer<"urgeOrder">;
  }

  /** The courier's progress of a delivered order. */
  async delivery(orderId: string, opts?: CallOptions): Promise<Answer<"getOrderDelivery">> {
    return (await this.get(`/v1/orders/${seg(orderId)}/delivery`, true, opts)) as Answer<"getOrderDelivery">;
  }

  /** Records which status messages the customer accepted in wx.requestSubscribeMessage. */
  async grantSubscriptions(orderId: string, body: RequestBody<"grantSubscriptions">, opts?: CallOptions): Promise<Answer<"grantSubscriptions">> {
    return (await this.send({ method: "PUT", path: `/v1/orders/${seg(orderId)}/subscriptions`, body: JSON.stringify(body), auth: true, signal: opts?.signal })).json as Answer<"grantSubscriptions">;
  }

  /** Asks for lines or an amount back after acceptance; one key per request asked. */
  async requestAfterSale(orderId: string, body: RequestBody<"requestAfterSale">, opts?: CallOptions): Promise<Answer<"requestAfterSale", 201>> {
    const intent = this.intents.open(`after-sale:${orderId}`, "POST", `/v1/orders/${seg(orderId)}/after-sales`, JSON.stringify(body));
    return (await this.intentCall(intent, opts)).json as Answer<"requestAfterSale", 201>;
  }

  /** The order's after-sales requests. */
  async afterSales(orderId: string, opts?: CallOptions): Promise<Answer<"listOrderAfterSales">> {
    return (await this.get(`/v1/orders/${seg(orderId)}/after-sales`, true, opts)) as Answer<"listOrderAfterSales">;
  }

  /** Takes a rejected after-sales request to the platform. */
  async escalateAfterSale(id: string, opts?: CallOptions): Promise<Answer<"escalateAfterSale">> {
    return (await this.intentCall(this.intents.open(`escalate:${id}`, "POST", `/v1/after-sales/${seg(id)}/escalate`), opts)).json as Answer<"escalateAfterSale">;
  }

  // --- vouchers ---

  /** The voucher templates on offer. */
  async voucherOffers(query: Query<"listVoucherOffers"> = {}, opts?: CallOptions): Promise<Answer<"listVoucherOffers">> {
    return (await this.get(`/v1/voucher-templates${qs(query)}`, false, opts)) as Answer<"listVoucherOffers">;
  }

  /** Claims a voucher of a template, once however often it is retried. */
  async claimVoucher(body: RequestBody<"claimVoucher">, opts?: CallOptions): Promise<Answer<"claimVoucher", 201>> {
    const b = JSON.stringify(body);
    const r = await this.intentCall(this.intents.open(`claim:${b}`, "POST", "/v1/vouchers/claim", b), opts);
    return r.json as Answer<"claimVoucher", 201>;
  }

  /** The customer's vouchers. */
  async vouchers(opts?: CallOptions): Promise<Answer<"listVouchers">> {
    return (await this.get("/v1/vouchers", true, opts)) as Answer<"listVouchers">;
  }

  // --- the loop ---

  private async get(path: string, auth: boolean, opts?: CallOptions): Promise<unknown> {
    return (await this.send({ method: "GET", path, auth, signal: opts?.signal })).json;
  }

  /** Sends an intent's request with its key; settles the intent on a yes or a final no. */
  private async intentCall(intent: PendingIntent, opts?: CallOptions): Promise<Answered> {
    try {
      const r = await this.send({ method: intent.method, path: intent.path, body: intent.body, auth: true, idempotencyKey: intent.key, signal: opts?.signal });
      this.intents.settle(intent);
      return r;
    } catch (err) {
      // A refusal settles the intent, except one that says nothing about
      // the request itself: the login failed, or the service broke (500),
      // and the same key may still be answered later.
      if (err instanceof ProblemError && err.final && err.status !== 401 && err.status < 500) this.intents.settle(intent);
      throw err;
    }
  }

  /**
   * One call: attempts until a final answer, the deadline, or the
   * caller's signal. A 401 of the session renews the session once.
   */
  private async send(req: Call, token?: string): Promise<Answered> {
    const deadline = this.now() + this.policy.deadlineMs;
    let renewed = false;
    let last: unknown;
    for (let attempt = 1; ; attempt++) {
      if (req.signal?.aborted) throw new GaveUpError(`${req.method} ${req.path}: cancelled`, last, attempt - 1);
      const headers: Record<string, string> = { Accept: "application/json, application/problem+json" };
      if (req.body !== undefined) headers["Content-Type"] = "application/json";
      if (req.idempotencyKey) headers["Idempotency-Key"] = req.idempotencyKey;
      let sent = token;
      if (req.auth) sent = (this.session() ?? (await this.signIn({ signal: req.signal }))).token;
      if (sent) headers.Authorization = `Bearer ${sent}`;
      const left = deadline - this.now();
      let res;
      try {
        res = await this.o.transport({
          method: req.method,
          url: this.base + req.path,
          headers,
          body: req.body,
          timeoutMs: Math.max(1, Math.min(this.policy.attemptTimeoutMs, left)),
        });
      } catch (err) {
        if (!(err instanceof NetworkError)) throw err;
        last = err;
      }
      let after: number | undefined;
      if (res) {
        if (res.status < 300) {
          return { status: res.status, header: res.header, json: res.body === "" ? undefined : JSON.parse(res.body) };
        }
        const problem = parseProblem(res.header("Content-Type"), res.body);
        if (res.status === 401 && req.auth && !renewed && problem?.type === "unauthorized") {
          // The session expired or was revoked: log in again, once, and
          // send the same request with the same key at once.
          renewed = true;
          if (this.session()?.token === sent) this.o.storage.remove(sessionKey);
          continue;
        }
        const retry = isRetryable(res.status, problem?.type);
        last = new ProblemError(res.status, problem, !retry, attempt);
        if (!retry) throw last;
        after = retryAfterMs(res.header("Retry-After"), this.now());
      }
      const delayMs = retryDelayMs(this.policy, attempt, after, this.random);
      if (this.now() + delayMs >= deadline) {
        throw new GaveUpError(`${req.method} ${req.path}: no final answer after ${attempt} attempts: ${String(last)}`, last, attempt);
      }
      this.o.onRetry?.({ method: req.method, path: req.path, attempt, delayMs, retryAfterMs: after, status: res?.status, idempotencyKey: req.idempotencyKey });
      await this.sleep(delayMs);
    }
  }
}

function seg(s: string): string {
  return encodeURIComponent(s);
}

function qs(q: object): string {
  const parts = Object.entries(q)
    .filter(([, v]) => v !== undefined && v !== null)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  return parts.length ? `?${parts.join("&")}` : "";
}
