// @takeout/miniprogram: the takeout API for WeChat mini-programs.

export * from "./client.js";
export * from "./intents.js";
export * from "./problem.js";
export * from "./retry.js";
export * from "./storage.js";
export * from "./transport.js";
export * from "./wx.js";
export type { components, operations, paths } from "./openapi.js";
