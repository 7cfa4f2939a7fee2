// When to try again and how long to wait: the service says when it can
// take a request again (Retry-After on every 503, 429 and 409
// request-in-progress); the SDK waits at least that long, spreads a herd
// of clients with jitter, and stops at a deadline.

import type { ProblemType } from "./problem.js";

/** How a call is retried. */
export interface RetryPolicy {
  /** The whole call, every attempt and wait included, ends by then (ms). Default 30 000. */
  deadlineMs: number;
  /** One attempt's timeout (ms). Default 10 000. */
  attemptTimeoutMs: number;
  /** The first backoff when the service gave no Retry-After (ms). Default 200. */
  baseDelayMs: number;
  /** The longest backoff when the service gave no Retry-After (ms). Default 5 000. */
  maxDelayMs: number;
  /** The share of a wait added at random, to spread clients that failed together. Default 0.2. */
  jitter: number;
}

/** The default policy: 30 s for a call, 10 s an attempt. */
export const defaultRetryPolicy: RetryPolicy = {
  deadlineMs: 30_000,
  attemptTimeoutMs: 10_000,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
  jitter: 0.2,
};

/**
 * Whether an answer is worth another attempt with the same key: the
 * service is busy or down (503, 502, 504), asked us to slow down (429),
 * or is still working on this very key (409 request-in-progress). Every
 * other 4xx means "no" and is final; a 500 is the service's own fault,
 * not a passing state, and is final too.
 */
export function isRetryable(status: number, type: ProblemType | undefined): boolean {
  if (status === 502 || status === 503 || status === 504 || status === 429) return true;
  return status === 409 && type === "request-in-progress";
}

/**
 * Retry-After in ms: delay-seconds or an HTTP date (RFC 9110 §10.2.3,
 * IMF-fixdate);
 * undefined when absent or unreadable.
 */
export function retryAfterMs(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // An HTTP date is IMF-fixdate, the form senders must use; anything else
  // ("-1", "1.5") is unreadable, whatever Date.parse makes of it.
  if (!/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(v)) return undefined;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The wait before attempt number `attempt + 1`: never less than the
 * service's Retry-After, plus up to `jitter` of it at random; without one,
 * exponential backoff with the same jitter.
 */
export function retryDelayMs(policy: RetryPolicy, attempt: number, retryAfter: number | undefined, random: () => number): number {
  const floor = retryAfter ?? Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(floor * (1 + policy.jitter * random()));
}
