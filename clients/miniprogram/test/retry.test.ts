// The retry rules and the intent store, without a service.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { IntentStore, defaultRetryPolicy, intentMaxAgeMs, isRetryable, memoryStorage, retryAfterMs, retryDelayMs, uuidV4 } from "../src/index.js";

describe("Retry-After", () => {
  const now = Date.parse("2026-12-07T10:00:00Z");
  const cases: Array<[string | undefined, number | undefined]> = [
    ["1", 1000],
    [" 120 ", 120_000],
    ["0", 0],
    ["Mon, 07 Dec 2026 10:00:05 GMT", 5000],
    ["Mon, 07 Dec 2026 09:00:00 GMT", 0],
    ["soon", undefined],
    ["-1", undefined],
    ["1.5", undefined],
    [undefined, undefined],
  ];
  for (const [header, want] of cases) {
    test(`${JSON.stringify(header)} is ${want} ms`, () => assert.equal(retryAfterMs(header, now), want));
  }
});

describe("the wait between attempts", () => {
  test("is never shorter than Retry-After, and at most its jitter longer", () => {
    for (const r of [0, 0.25, 0.5, 0.999]) {
      const d = retryDelayMs(defaultRetryPolicy, 3, 2000, () => r);
      assert.ok(d >= 2000 && d <= 2000 * (1 + defaultRetryPolicy.jitter), `${d}`);
    }
  });
  test("without Retry-After backs off exponentially up to the cap", () => {
    const p = { ...defaultRetryPolicy, baseDelayMs: 100, maxDelayMs: 1000, jitter: 0 };
    assert.deepEqual([1, 2, 3, 4, 5, 9].map((a) => retryDelayMs(p, a, undefined, () => 0.5)), [100, 200, 400, 800, 1000, 1000]);
  });
  test("spreads clients that failed together", () => {
    const waits = new Set([0.1, 0.4, 0.7].map((r) => retryDelayMs(defaultRetryPolicy, 1, 1000, () => r)));
    assert.equal(waits.size, 3);
  });
});

describe("what is retried", () => {
  const cases: Array<[number, Parameters<typeof isRetryable>[1], boolean]> = [
    [503, "service-unavailable", true],
    [502, "upstream-unavailable", true],
    [504, undefined, true],
    [429, "rate-limited", true],
    [409, "request-in-progress", true],
    [409, "out-of-stock", false],
    [409, "quote-changed", false],
    [422, "idempotency-key-mismatch", false],
    [400, "invalid-request", false],
    [401, "unauthorized", false],
    [403, "confirm-token-forbidden", false],
    [410, "confirm-token-expired", false],
    [500, "internal-error", false],
  ];
  for (const [status, type, want] of cases) {
    test(`${status} ${type ?? ""}: ${want ? "retried" : "final"}`, () => assert.equal(isRetryable(status, type), want));
  }
});

describe("intents", () => {
  const bytes = () => Uint8Array.from({ length: 16 }, (_, i) => i * 17);
  test("a key is a version 4 UUID", () => {
    assert.match(uuidV4(bytes()), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  test("one key per intent: the same request reuses it, another makes a new one, settling forgets it", () => {
    let n = 0;
    let now = 1_000_000;
    const storage = memoryStorage();
    const store = new IntentStore(storage, () => `k${++n}`, () => now);
    const a = store.open("order:d1", "POST", "/v1/orders", '{"confirm_token":"t1"}');
    assert.equal(store.open("order:d1", "POST", "/v1/orders", '{"confirm_token":"t1"}').key, a.key);
    // What is stored is what a restarted page reads.
    const reread = new IntentStore(memoryStorage(storage.snapshot()), () => "never", () => now);
    assert.equal(reread.pending("order:")[0]?.key, a.key);

    const b = store.open("order:d1", "POST", "/v1/orders", '{"confirm_token":"t2"}');
    assert.notEqual(b.key, a.key, "another token of the scope is another intent");
    store.settle(a); // an old intent's answer does not forget the new one
    assert.equal(store.pending().length, 1);
    store.settle(b);
    assert.deepEqual(store.pending(), []);
    assert.equal(storage.get("takeout:intents"), undefined);

    store.open("pay:1", "POST", "/v1/orders/1/pay");
    now += intentMaxAgeMs + 1;
    assert.deepEqual(store.pending(), [], "an intent older than the service keeps its key is not resumed");
  });

  test("unreadable storage is an empty store", () => {
    const storage = memoryStorage({ "takeout:intents": "{not json" });
    const store = new IntentStore(storage, () => "k", () => 0);
    assert.deepEqual(store.pending(), []);
  });
});
