// The menu: dishes to add to the cart; "cart" goes to the cart page.

import type { Answer } from "../../../src/index";
import type { TakeoutApp } from "../../app";

type Dish = Answer<"getMenu">["dishes"][number];

Page({
  data: { merchantId: "", dishes: [] as Dish[], cart: {} as Record<string, number>, error: "" },

  async onLoad(query: Record<string, string | undefined>) {
    const app = getApp<TakeoutApp>();
    const merchantId = query.merchant ?? "";
    try {
      const menu = await app.takeout.menu(merchantId);
      this.setData({ merchantId, dishes: menu.dishes });
    } catch (err) {
      this.setData({ error: String(err) });
    }
  },

  add(e: WechatMiniprogram.TouchEvent<Record<string, never>, Record<string, never>, { id: string }>) {
    const id = e.currentTarget.dataset.id;
    this.setData({ [`cart.${id}`]: (this.data.cart[id] ?? 0) + 1 });
  },

  checkout() {
    const items = Object.entries(this.data.cart).map(([dish_id, qty]) => ({ dish_id, qty }));
    wx.setStorageSync("cart", JSON.stringify({ merchant_id: this.data.merchantId, items }));
    wx.navigateTo({ url: "/pages/cart/cart" });
  },
});
