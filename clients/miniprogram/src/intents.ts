// Intents: one Idempotency-Key per thing the customer meant to do, kept
// in storage until the service has said yes or no, so that every retry,
// a second tap and a page restarted after WeChat killed it all send the
// same key, and the service does it once.

import type { KeyValueStorage } from "./storage.js";

/** A request whose outcome the SDK does not know yet. */
export interface PendingIntent {
  /** What the intent is about, e.g. `order:<digest>` or `pay:<order id>`. */
  scope: string;
  /** The Idempotency-Key every attempt of this intent sends. */
  key: string;
  method: string;
  path: string;
  /** The JSON body every attempt sends, byte for byte. */
  body?: string;
  /** When the intent was made (ms since the epoch). */
  createdAt: number;
}

const storageKey = "takeout:intents";

/**
 * How long a pending intent is worth resuming: well inside the service's
 * retention of idempotency records (72 hours by default), after which the
 * same key would be a new request.
 */
export const intentMaxAgeMs = 24 * 60 * 60 * 1000;

/** The store of pending intents, one storage entry for all of them. */
export class IntentStore {
  constructor(
    private readonly storage: KeyValueStorage,
    private readonly newKey: () => string,
    private readonly now: () => number,
  ) {}

  /**
   * The intent for scope: the stored one when it is the same request
   * (method, path and body), else a new one with a new key, stored
   * before this returns.
   */
  open(scope: string, method: string, path: string, body?: string): PendingIntent {
    const all = this.read();
    const cur = all[scope];
    if (cur && cur.method === method && cur.path === path && cur.body === body) return cur;
    const intent: PendingIntent = { scope, key: this.newKey(), method, path, body, createdAt: this.now() };
    all[scope] = intent;
    this.write(all);
    return intent;
  }

  /** Forgets an intent the service has settled (placed, or refused). */
  settle(intent: PendingIntent): void {
    const all = this.read();
    // Only this key: a newer intent of the same scope stays.
    if (all[intent.scope]?.key !== intent.key) return;
    delete all[intent.scope];
    this.write(all);
  }

  /** The intents still pending whose scope starts with prefix, oldest first. */
  pending(prefix = ""): PendingIntent[] {
    return Object.values(this.read())
      .filter((i) => i.scope.startsWith(prefix))
      .sort((a, b) => a.createdAt - b.createdAt);
  }

  private read(): Record<string, PendingIntent> {
    const raw = this.storage.get(storageKey);
    if (!raw) return {};
    let all: Record<string, PendingIntent>;
    try {
      all = JSON.parse(raw) as Record<string, PendingIntent>;
    } catch {
      return {};
    }
    const oldest = this.now() - intentMaxAgeMs;
    for (const [scope, i] of Object.entries(all)) if (!(i.createdAt >= oldest)) delete all[scope];
    return all;
  }

  private write(all: Record<string, PendingIntent>): void {
    if (Object.keys(all).length === 0) this.storage.remove(storageKey);
    else this.storage.set(storageKey, JSON.stringify(all));
  }
}

/** The random source of keys: 16 bytes. */
export type RandomBytes = () => Uint8Array;

declare const crypto: { getRandomValues(a: Uint8Array): Uint8Array } | undefined;

/**
 * The runtime's cryptographic random source when it has one, else
 * Math.random: a key must be unique among one customer's keys (the
 * service scopes keys per user), not secret.
 */
export function defaultRandomBytes(): RandomBytes {
  const c = typeof crypto === "undefined" ? undefined : crypto;
  if (c && typeof c.getRandomValues === "function") return () => c.getRandomValues(new Uint8Array(16));
  return () => {
    const b = new Uint8Array(16);
    for (let i = 0; i < b.length; i++) b[i] = Math.floor(Math.random() * 256);
    return b;
  };
}

/** A version 4 UUID from 16 random bytes: a key the service takes as a bare token. */
export function uuidV4(bytes: Uint8Array): string {
  const b = Uint8Array.from(bytes.subarray(0, 16));
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
