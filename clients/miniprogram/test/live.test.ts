// The SDK against a live takeout, behind a proxy that loses answers.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { GaveUpError, ProblemError, type RetryInfo, isProblem, memoryStorage } from "../src/index.js";
import { cart, customer, fixture, holdOrders, ordersInDatabase, simPay, until } from "./fixture.js";
import { type Seen, lossyProxy } from "./proxy.js";

const fx = fixture();
const proxy = lossyProxy(fx.api);

const submits = (key?: string): Seen[] => proxy.seen.filter((s) => s.method === "POST" && s.path === "/v1/orders" && (key === undefined || s.key === key));

describe("exactly once through a lossy network", () => {
  test("a storm of retried submits, from taps and devices, places one order", async () => {
    // Every third submit is reset before it arrives, every third answered
    // and then reset, so that the service places the order and the
    // client never hears.
    let n = 0;
    proxy.seen = [];
    proxy.plan = ({ method, path }) => (method === "POST" && path === "/v1/orders" ? (["reset", "drop-answer", "pass"] as const)[n++ % 3]! : "pass");
    const phone = memoryStorage();
    const taps = Array.from({ length: 8 }, () => customer(proxy.url, phone, "sdk-storm"));
    const others = Array.from({ length: 4 }, () => customer(proxy.url, memoryStorage(), "sdk-storm"));
    const quote = await taps[0]!.confirm(cart(fx, 0, 2));

    const placed = await Promise.all([...taps, ...others].map((c) => c.placeOrder(quote)));

    for (const p of placed) assert.equal(p.order.id, quote.order_id, "every tap and device is answered with the one order");
    assert.ok(placed.some((p) => p.replayed || p.duplicate), "some answers are replays of the first");
    const keys = new Set(submits().map((s) => s.key));
    assert.equal(keys.size, 1 + others.length, "the taps on one phone share one key; each other device has its own");
    assert.ok(submits().some((s) => s.fault === "drop-answer" && s.status === 201), "an order was placed whose answer was lost");
    assert.ok(submits().some((s) => s.fault === "reset"), "a submit was reset before it arrived");
    assert.deepEqual(taps[0]!.pendingIntents(), [], "the placed order's key is forgotten");
    assert.equal(await ordersInDatabase(fx, "sdk-storm"), 1);
  });

  test("a page killed mid-retry resumes with the same key after a restart", async () => {
    proxy.seen = [];
    proxy.plan = ({ method, path }) => (method === "POST" && path === "/v1/orders" ? "drop-answer" : "pass");
    const storage = memoryStorage();
    const page = customer(proxy.url, storage, "sdk-killed");
    const quote = await page.confirm(cart(fx, 0, 1));
    const killed = { aborted: false };
    const first = page.placeOrder(quote, { signal: killed });
    await until(() => submits().some((s) => s.status === 201));
    killed.aborted = true; // WeChat kills the page; its storage stays on disk
    await assert.rejects(first, GaveUpError);
    const disk = storage.snapshot();

    proxy.plan = () => "pass";
    const restarted = customer(proxy.url, memoryStorage(disk), "sdk-killed");
    const pending = restarted.pendingIntents("order:");
    assert.equal(pending.length, 1);
    assert.equal(pending[0]!.key, submits()[0]!.key, "the restarted page has the key the killed one sent");
    const [resumed] = await restarted.resumePending();
    const placed = resumed?.placed;
    assert.ok(placed, `resumed: ${String(resumed?.error)}`);
    assert.equal(placed.order.id, quote.order_id);
    assert.equal(placed.replayed, true, "the service replays the first answer");
    assert.equal(new Set(submits().map((s) => s.key)).size, 1, "one key from first attempt to resume");
    assert.deepEqual(restarted.pendingIntents(), []);
    assert.equal(await ordersInDatabase(fx, "sdk-killed"), 1);
  });

  test("pay and cancel are retried with their keys and happen once", async () => {
    let payDrops = 0;
    let cancelDrops = 0;
    let submitted = 0;
    proxy.seen = [];
    proxy.plan = ({ method, path }) => {
      if (method === "POST" && path.endsWith("/pay") && payDrops++ < 2) return "drop-answer";
      if (method === "POST" && path.endsWith("/cancel") && cancelDrops++ < 2) return "drop-answer";
      if (method === "POST" && path === "/v1/orders" && submitted++ === 0) return "reset";
      return "pass";
    };
    const c = customer(proxy.url, memoryStorage(), "sdk-flow");
    const menu = await c.menu(fx.merchant_id);
    assert.ok(menu.dishes.length >= 3);
    const quote = await c.confirm(cart(fx, 2, 1));
    const { order } = await c.placeOrder(quote);
    const params = await c.pay(order.id);
    assert.match(params.package, /^prepay_id=/);
    const again = await c.pay(order.id);
    assert.equal(again.package, params.package, "the live prepay is reused");
    const paid = submits().length;
    assert.equal(paid, 2, "the reset submit was sent again");
    await simPay(fx, order.id);
    const done = await c.waitForOrder(order.id, (o) => o.status !== "PENDING_PAYMENT", { intervalMs: 100 });
    assert.equal(done.status, "PAID");
    const payKeys = new Set(proxy.seen.filter((s) => s.path.endsWith("/pay")).map((s) => s.key));
    assert.equal(payKeys.size, 2, "one key per pay intent, kept across its retries");

    const other = customer(proxy.url, memoryStorage(), "sdk-cancel");
    const q2 = await other.confirm(cart(fx, 2, 3));
    const p2 = await other.placeOrder(q2);
    const cancelled = await other.cancel(p2.order.id);
    assert.equal(cancelled.status, "CANCELLED");
    assert.equal(cancelDrops, 3, "two cancels lost their answers and the third was answered");
    const history = await c.orders();
    assert.equal(history.orders.length, 1);
  });
});

describe("retries honour the service", () => {
  test("a duplicate of a submit still running waits Retry-After (409 request-in-progress)", async () => {
    proxy.seen = [];
    proxy.plan = () => "pass";
    const phone = memoryStorage();
    const retries: RetryInfo[] = [];
    const a = customer(proxy.url, phone, "sdk-slow");
    const b = customer(proxy.url, phone, "sdk-slow", { onRetry: (i) => retries.push(i) });
    const quote = await a.confirm(cart(fx, 0, 1));
    const release = await holdOrders(fx);
    try {
      const first = a.placeOrder(quote);
      await until(() => submits().length === 1);
      const second = b.placeOrder(quote);
      await until(() => submits().some((s) => s.status === 409), 5_000);
      await new Promise((r) => setTimeout(r, 1500));
      await release();
      const [pa, pb] = await Promise.all([first, second]);
      assert.equal(pa.order.id, pb.order.id);
    } finally {
      await release();
    }
    const busy = submits().filter((s) => s.status === 409);
    assert.ok(busy.length >= 1);
    for (const s of busy) {
      const next = submits().find((n) => n.key === s.key && n.at > s.doneAt!);
      if (!next) assert.fail("the busy answer was followed by another attempt");
      const gap = next.at - s.doneAt!;
      assert.ok(gap >= 1000, `waited ${gap} ms after Retry-After: 1`);
      // Loose above: a loaded machine may be slow to send; the planned
      // wait itself is checked exactly below.
      assert.ok(gap <= 1000 * 1.2 + 1500, `waited ${gap} ms, far more than Retry-After with its jitter`);
    }
    const waits = retries.filter((r) => r.status === 409);
    assert.ok(waits.length >= 1);
    for (const w of waits) {
      assert.equal(w.retryAfterMs, 1000);
      assert.ok(w.delayMs >= 1000 && w.delayMs <= 1200, `planned ${w.delayMs} ms`);
      assert.equal(w.idempotencyKey, submits()[0]!.key, "the retry carries the intent's key");
    }
    assert.equal(await ordersInDatabase(fx, "sdk-slow"), 1);
  });

  test("a gateway's 503 is retried after its Retry-After, measured at the proxy", async () => {
    let shed = 0;
    proxy.seen = [];
    proxy.plan = ({ path }) => (path.endsWith("/menu") && shed++ < 2 ? { status: 503, retryAfter: 2 } : "pass");
    const c = customer(proxy.url, memoryStorage(), "sdk-menu");
    const menu = await c.menu(fx.merchant_id);
    assert.equal(menu.merchant.id, fx.merchant_id);
    const tries = proxy.seen.filter((s) => s.path.endsWith("/menu"));
    assert.equal(tries.length, 3);
    for (let i = 1; i < tries.length; i++) {
      const gap = tries[i]!.at - tries[i - 1]!.doneAt!;
      assert.ok(gap >= 2000 && gap <= 2000 * 1.2 + 1500, `attempt ${i + 1} came ${gap} ms after a Retry-After of 2 s`);
    }
  });

  test("the deadline bounds every call; a Retry-After beyond it is not waited for", async () => {
    proxy.seen = [];
    proxy.plan = ({ path }) => (path.endsWith("/menu") ? { status: 503, retryAfter: 1 } : path === "/v1/merchants" ? { status: 503, retryAfter: 60 } : "pass");
    const c = customer(proxy.url, memoryStorage(), "sdk-menu", { retry: { deadlineMs: 2500, baseDelayMs: 20 } });
    let t0 = Date.now();
    await assert.rejects(c.menu(fx.merchant_id), (err: unknown) => err instanceof GaveUpError && err.attempts >= 2 && err.attempts <= 3);
    assert.ok(Date.now() - t0 < 2500 + 1500, "ended near its deadline");
    t0 = Date.now();
    await assert.rejects(c.merchants(), (err: unknown) => err instanceof GaveUpError && err.attempts === 1 && isProblem(err.last, "service-unavailable"));
    assert.ok(Date.now() - t0 < 1500, "gave up at once rather than waiting a minute");
  });

  test("a no is final: out-of-stock is sent once and its key forgotten", async () => {
    proxy.seen = [];
    proxy.plan = () => "pass";
    const first = customer(proxy.url, memoryStorage(), "sdk-first");
    const second = customer(proxy.url, memoryStorage(), "sdk-second");
    const q1 = await first.confirm(cart(fx, 1, 1));
    const q2 = await second.confirm(cart(fx, 1, 1));
    await first.placeOrder(q1);
    proxy.seen = [];
    await assert.rejects(second.placeOrder(q2), (err: unknown) => {
      if (!isProblem(err, "out-of-stock")) return false;
      assert.equal(err.final, true);
      assert.equal(err.status, 409);
      return true;
    });
    assert.equal(submits().length, 1, "a refusal is not retried");
    assert.deepEqual(second.pendingIntents(), []);
  });

  test("a revoked session is renewed once, then the refusal stands", async () => {
    proxy.seen = [];
    proxy.plan = () => "pass";
    const c = customer(proxy.url, memoryStorage(), "sdk-renew");
    const s = await c.signIn();
    const out = await fetch(`${fx.api}/v1/auth/logout`, { method: "POST", headers: { Authorization: `Bearer ${s.token}` } });
    assert.equal(out.status, 204);
    const page = await c.orders();
    assert.deepEqual(page.orders, []);
    assert.equal(c.logins, 2, "logged in again after the 401");
    assert.deepEqual(
      proxy.seen.filter((x) => x.path === "/v1/orders").map((x) => x.status),
      [401, 200],
    );

    proxy.seen = [];
    proxy.plan = ({ path }) => (path === "/v1/orders" ? { status: 401 } : "pass");
    await assert.rejects(c.orders(), (err: unknown) => err instanceof ProblemError && err.status === 401 && err.final);
    assert.equal(c.logins, 3, "one renewal, not a loop");
    assert.equal(proxy.seen.filter((x) => x.path === "/v1/orders").length, 2);
  });
});
