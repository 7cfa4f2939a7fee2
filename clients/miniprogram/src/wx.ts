// The mini-program's side of login and payment, over the parts of `wx`
// they use (structural, so any `wx` with these members will do).

import type { PaymentParams } from "./client.js";

/** The part of `wx` login uses. */
export interface WxLoginApi {
  login(options: { success(res: { code: string }): void; fail(err: { errMsg: string }): void }): unknown;
}

/** A login-code source over wx.login, for ClientOptions.loginCode. */
export function wxLoginCode(wx: WxLoginApi): () => Promise<string> {
  return () =>
    new Promise((resolve, reject) => {
      wx.login({ success: (res) => resolve(res.code), fail: (err) => reject(new Error(`wx.login: ${err.errMsg}`)) });
    });
}

/** The part of `wx` payment uses. */
export interface WxPaymentApi {
  requestPayment(options: {
    timeStamp: string;
    nonceStr: string;
    package: string;
    signType: "RSA";
    paySign: string;
    success(res: unknown): void;
    fail(err: { errMsg: string }): void;
  }): unknown;
}

/**
 * Opens WeChat's payment sheet. Resolves "paid" or "cancelled" (the
 * customer closed the sheet; the order stays payable until its
 * deadline). A success here is the customer's word: the order turns PAID
 * when WeChat's notification reaches the service, so follow with
 * client.waitForOrder.
 */
export function requestPayment(wx: WxPaymentApi, p: PaymentParams): Promise<"paid" | "cancelled"> {
  return new Promise((resolve, reject) => {
    wx.requestPayment({
      timeStamp: p.timeStamp,
      nonceStr: p.nonceStr,
      package: p.package,
      signType: p.signType,
      paySign: p.paySign,
      success: () => resolve("paid"),
      fail: (err) => (/cancel/.test(err.errMsg) ? resolve("cancelled") : reject(new Error(`wx.requestPayment: ${err.errMsg}`))),
    });
  });
}
