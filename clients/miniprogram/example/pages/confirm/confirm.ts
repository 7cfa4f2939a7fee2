// Confirm: the priced cart, then "place order" and pay. The order is
// placed once however often the customer taps or the network drops the
// answer: the SDK keeps one key for this confirmation.

import { type Cart, type Confirmation, isProblem, requestPayment } from "../../../src/index";
import type { TakeoutApp } from "../../app";

Page({
  data: { quote: null as Confirmation | null, placing: false, message: "" },

  async onShow() {
    const app = getApp<TakeoutApp>();
    const saved = JSON.parse(String(wx.getStorageSync("cart") || "{}")) as Pick<Cart, "merchant_id" | "items">;
    const cart: Cart = { ...saved, address: { name: "Han Meimei", phone: "13900139000", detail: "Unit 3, 9 Binhai Ave" } };
    try {
      const quote = await app.takeout.confirm(cart);
      if (quote.duplicate) {
        // This cart was placed a moment ago: show that order.
        wx.redirectTo({ url: `/pages/order/order?id=${quote.order_id}` });
        return;
      }
      this.setData({ quote });
    } catch (err) {
      this.setData({ message: this.explain(err) });
    }
  },

  async place() {
    const quote = this.data.quote;
    if (!quote) return;
    const app = getApp<TakeoutApp>();
    this.setData({ placing: true });
    try {
      const { order } = await app.takeout.placeOrder(quote);
      const params = await app.takeout.pay(order.id);
      if ((await requestPayment(wx, params)) === "paid") {
        await app.takeout.waitForOrder(order.id, (o) => o.status !== "PENDING_PAYMENT");
      }
      wx.redirectTo({ url: `/pages/order/order?id=${order.id}` });
    } catch (err) {
      this.setData({ placing: false, message: this.explain(err) });
    }
  },

  explain(err: unknown): string {
    if (isProblem(err, "out-of-stock")) return "Some dishes just sold out.";
    if (isProblem(err, "quote-changed", "confirm-token-expired")) return "The prices changed: check the cart again.";
    if (isProblem(err, "merchant-closed")) return "The shop has closed.";
    if (isProblem(err)) return err.problem.detail;
    // No answer in time: the SDK kept the key, so tapping again (or the
    // next launch) finishes this order rather than placing another.
    return "The network is slow. Tap again: the order will not be placed twice.";
  },
});
