// An order: its status, refreshed while the kitchen works on it.

import type { Order } from "../../../src/index";
import type { TakeoutApp } from "../../app";

Page({
  data: { order: null as Order | null, timer: 0 },

  async onLoad(query: Record<string, string | undefined>) {
    const app = getApp<TakeoutApp>();
    const id = query.id ?? "";
    const refresh = async () => this.setData({ order: await app.takeout.order(id) });
    await refresh();
    this.setData({ timer: setInterval(() => void refresh(), 10_000) });
  },

  onUnload() {
    clearInterval(this.data.timer);
  },

  async cancel() {
    const order = this.data.order;
    if (!order) return;
    this.setData({ order: await getApp<TakeoutApp>().takeout.cancel(order.id) });
  },
});
