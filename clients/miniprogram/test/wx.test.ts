// The mini-program adapters against a live takeout: a `wx` that behaves
// as the platform documents it (callbacks, header names as the server
// spelled them, "request:fail" on a lost connection, storage that reads
// "" for an absent key) carries the whole order flow.

import assert from "node:assert/strict";
import { test } from "node:test";
import {
  TakeoutClient,
  type WxLoginApi,
  type WxPaymentApi,
  type WxRequestApi,
  type WxStorageApi,
  requestPayment,
  wxLoginCode,
  wxStorage,
  wxTransport,
} from "../src/index.js";
import { cart, fixture, ordersInDatabase, simPay } from "./fixture.js";
import { lossyProxy } from "./proxy.js";

const fx = fixture();
const proxy = lossyProxy(fx.api);

/** A `wx` over fetch and a Map, for one customer. */
function fakeWx(code: string, disk: Map<string, unknown>): WxRequestApi & WxStorageApi & WxLoginApi & WxPaymentApi & { paid: string[] } {
  const paid: string[] = [];
  return {
    paid,
    request(o) {
      fetch(o.url, { method: o.method, headers: o.header, body: o.data })
        .then(async (res) => {
          const header: Record<string, string> = {};
          // The platform passes names as the server spelled them.
          res.headers.forEach((v, k) => (header[k.replace(/(^|-)[a-z]/g, (m) => m.toUpperCase())] = v));
          o.success({ statusCode: res.status, header, data: await res.text() });
        })
        .catch(() => o.fail({ errMsg: "request:fail socket hang up" }));
      return {};
    },
    getStorageSync: (key) => disk.get(key) ?? "",
    setStorageSync: (key, data) => void disk.set(key, data),
    removeStorageSync: (key) => void disk.delete(key),
    login: (o) => void setTimeout(() => o.success({ code }), 1),
    requestPayment(o) {
      paid.push(o.package);
      const orderId = /^prepay_id=wxT(\d+)1$/.exec(o.package)?.[1];
      if (!orderId) return o.fail({ errMsg: `requestPayment:fail unknown package ${o.package}` });
      simPay(fx, orderId).then(() => o.success({ errMsg: "requestPayment:ok" }), (err: Error) => o.fail({ errMsg: err.message }));
      return undefined;
    },
  };
}

test("the order flow over wx.request, wx storage, wx.login and wx.requestPayment", async () => {
  let submits = 0;
  proxy.plan = ({ method, path }) => (method === "POST" && path === "/v1/orders" && submits++ < 2 ? (submits === 1 ? "reset" : "drop-answer") : "pass");
  const disk = new Map<string, unknown>();
  const wx = fakeWx("sdk-wx", disk);
  const takeout = new TakeoutClient({ baseUrl: proxy.url, transport: wxTransport(wx), storage: wxStorage(wx), loginCode: wxLoginCode(wx), retry: { baseDelayMs: 20 } });

  const menu = await takeout.menu(fx.merchant_id);
  const quote = await takeout.confirm(cart(fx, 0, 1));
  assert.equal(quote.items[0]?.dish_id, menu.dishes[0]?.id);
  const placed = await takeout.placeOrder(quote);
  assert.equal(placed.order.id, quote.order_id);
  assert.equal(placed.replayed, true, "the third attempt replays the answer the second lost (read from a header spelled Idempotent-Replayed)");
  assert.equal(await requestPayment(wx, await takeout.pay(placed.order.id)), "paid");
  const order = await takeout.waitForOrder(placed.order.id, (o) => o.status === "PAID", { intervalMs: 100 });
  assert.equal(order.status, "PAID");
  assert.equal(typeof disk.get("takeout:session"), "string", "the session is kept in wx storage");
  assert.equal(disk.has("takeout:intents"), false, "nothing is left pending");
  assert.equal(await ordersInDatabase(fx, "sdk-wx"), 1);
});
