// The live service the tests run against: TestClientSDK (cmd/api) starts
// a shop and writes its addresses to the file TAKEOUT_SDK_FIXTURE names.

import { readFileSync } from "node:fs";
import { type Cart, TakeoutClient, type ClientOptions, type KeyValueStorage, fetchTransport } from "../src/index.js";

/** The running shop. */
export interface Fixture {
  api: string;
  control: string;
  wxsim: string;
  merchant_id: string;
  dishes: string[];
}

/** The fixture, or an error saying how to get one. */
export function fixture(): Fixture {
  const file = process.env.TAKEOUT_SDK_FIXTURE;
  if (!file) {
    throw new Error("TAKEOUT_SDK_FIXTURE is not set: these tests run against a live takeout; run `make test`, or `go test ./cmd/api -run TestClientSDK`");
  }
  return JSON.parse(readFileSync(file, "utf8")) as Fixture;
}

/** A client of baseUrl logging in as the customer CODE (wxsim's openid sim-CODE), counting its logins. */
export function customer(baseUrl: string, storage: KeyValueStorage, code: string, extra: Partial<ClientOptions> = {}): TakeoutClient & { logins: number } {
  const c: TakeoutClient & { logins: number } = Object.assign(
    new TakeoutClient({
      baseUrl,
      transport: fetchTransport(fetch),
      storage,
      loginCode: async () => {
        c.logins++;
        return code;
      },
      retry: { baseDelayMs: 20, maxDelayMs: 200, deadlineMs: 20_000, attemptTimeoutMs: 8_000 },
      ...extra,
    }),
    { logins: 0 },
  );
  return c;
}

/** A cart of qty of the shop's dish i. */
export function cart(fx: Fixture, dish: number, qty: number): Cart {
  return {
    merchant_id: fx.merchant_id,
    items: [{ dish_id: fx.dishes[dish]!, qty }],
    address: { name: "Han Meimei", phone: "13900139000", detail: "Unit 3, 9 Binhai Ave" },
  };
}

/** How many orders the customer CODE has in the database. */
export async function ordersInDatabase(fx: Fixture, code: string): Promise<number> {
  const res = await fetch(`${fx.control}/orders?user=${encodeURIComponent(code)}`);
  if (res.status !== 200) throw new Error(`control /orders: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { orders: number }).orders;
}

/** Holds the orders table (no order can be written) until release, or 10 s. */
export async function holdOrders(fx: Fixture): Promise<() => Promise<void>> {
  const res = await fetch(`${fx.control}/hold`, { method: "POST" });
  if (res.status !== 204) throw new Error(`control /hold: ${res.status} ${await res.text()}`);
  return async () => void (await fetch(`${fx.control}/release`, { method: "POST" }));
}

/** wxsim: the customer pays the order's first prepay (what wx.requestPayment does in WeChat). */
export async function simPay(fx: Fixture, orderId: string): Promise<void> {
  const res = await fetch(`${fx.wxsim}/sim/pay`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ out_trade_no: `T${orderId}-1` }),
  });
  if (res.status !== 200) throw new Error(`wxsim /sim/pay: ${res.status} ${await res.text()}`);
}

/** Waits until cond holds, polling every 10 ms, for at most ms. */
export async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}
