// The cart: what the menu page put in storage, with quantities to change
// before checking out. Nothing is priced here: the confirm page asks the
// service, which prices from its own menu.

interface Line {
  dish_id: string;
  qty: number;
}

interface SavedCart {
  merchant_id: string;
  items: Line[];
}

Page({
  data: { cart: { merchant_id: "", items: [] } as SavedCart },

  onShow() {
    const cart = JSON.parse(String(wx.getStorageSync("cart") || '{"merchant_id":"","items":[]}')) as SavedCart;
    this.setData({ cart });
  },

  change(e: WechatMiniprogram.TouchEvent<Record<string, never>, Record<string, never>, { index: number; delta: number }>) {
    const { index, delta } = e.currentTarget.dataset;
    // A line goes between 0 (removed) and 99, what one order line may hold.
    const items = this.data.cart.items
      .map((l, i) => (i === index ? { ...l, qty: Math.min(99, l.qty + delta) } : l))
      .filter((l) => l.qty > 0);
    const cart = { ...this.data.cart, items };
    wx.setStorageSync("cart", JSON.stringify(cart));
    this.setData({ cart });
  },

  checkout() {
    if (this.data.cart.items.length > 0) wx.navigateTo({ url: "/pages/confirm/confirm" });
  },
});
