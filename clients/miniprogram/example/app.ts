// The app: one client for every page, over wx.request and wx storage.
// At launch it resumes any order whose answer was lost when WeChat killed
// the page that placed it.

import { TakeoutClient, type WxLoginApi, type WxPaymentApi, type WxRequestApi, type WxStorageApi, wxLoginCode, wxStorage, wxTransport } from "../src/index";

// The SDK's adapters take WeChat's own `wx` as it is typed.
const platform: WxRequestApi & WxStorageApi & WxLoginApi & WxPaymentApi = wx;

/** What every page reads from getApp(). */
export interface TakeoutApp {
  takeout: TakeoutClient;
  /** Orders placed by an earlier run of the app whose answers it never saw. */
  resumed: string[];
}

App<TakeoutApp>({
  takeout: new TakeoutClient({
    baseUrl: "https://takeout.example.com",
    transport: wxTransport(platform),
    storage: wxStorage(platform),
    loginCode: wxLoginCode(platform),
  }),
  resumed: [],
  onLaunch() {
    void this.takeout.resumePending().then((results) => {
      for (const r of results) if (r.placed) this.resumed.push(r.placed.order.id);
      if (this.resumed.length > 0) wx.navigateTo({ url: `/pages/order/order?id=${this.resumed[0]}` });
    });
  },
});
