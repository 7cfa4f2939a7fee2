// Storage: where the SDK keeps what must outlive a page (the session and
// the keys of intents not yet settled). Synchronous on purpose, as
// wx.getStorageSync is: a key must be on disk before its first request
// leaves, or a page killed in between would lose it.

/** A string store that survives the page (wx storage, a file, memory in tests). */
export interface KeyValueStorage {
  get(key: string): string | undefined;
  set(key: string, value: string): void;
  remove(key: string): void;
}

/** The part of the mini-program's `wx` the wx storage uses. */
export interface WxStorageApi {
  getStorageSync(key: string): unknown;
  setStorageSync(key: string, data: unknown): void;
  removeStorageSync(key: string): void;
}

/** Storage over wx.getStorageSync and wx.setStorageSync. */
export function wxStorage(wx: WxStorageApi): KeyValueStorage {
  return {
    // An absent key reads as "" in the mini-program.
    get: (key) => {
      const v = wx.getStorageSync(key);
      return typeof v === "string" && v !== "" ? v : undefined;
    },
    set: (key, value) => wx.setStorageSync(key, value),
    remove: (key) => wx.removeStorageSync(key),
  };
}

/** Storage in memory: for tests, or where nothing may be kept. */
export function memoryStorage(initial?: Record<string, string>): KeyValueStorage & { snapshot(): Record<string, string> } {
  const m = new Map<string, string>(Object.entries(initial ?? {}));
  return {
    get: (key) => m.get(key),
    set: (key, value) => void m.set(key, value),
    remove: (key) => void m.delete(key),
    snapshot: () => {
      const out: Record<string, string> = {};
      m.forEach((v, k) => (out[k] = v));
      return out;
    },
  };
}
