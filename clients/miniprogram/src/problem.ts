// Problems: every refusal of the service is an RFC 9457 document whose
// `type` is one of the slugs of api/openapi.yaml; the SDK hands them to
// the page typed, so a `switch` on the type is checked by the compiler.

import type { components } from "./openapi.js";

/** An RFC 9457 problem document as the service sends it. */
export type Problem = components["schemas"]["Problem"];

/** Every problem type the service may answer with. */
export type ProblemType = Problem["type"];

/**
 * The service answered with a refusal (a 4xx or 5xx). `final` is true
 * when the answer settles the intent (a "no", such as out-of-stock); it is
 * false when the SDK stopped retrying something that may still succeed
 * (503 past the deadline): the intent is kept and the same key is sent
 * when it is resumed.
 */
export class ProblemError extends Error {
  override readonly name = "ProblemError";
  constructor(
    readonly status: number,
    /** The document; undefined when the answer was not one (a proxy's error page). */
    readonly problem: Problem | undefined,
    readonly final: boolean,
    /** How many attempts were made. */
    readonly attempts: number,
  ) {
    super(problem ? `${status} ${problem.type}: ${problem.detail}` : `HTTP ${status}`);
  }

  /** The problem's type, or undefined when the answer carried no problem document. */
  get type(): ProblemType | undefined {
    return this.problem?.type;
  }
}

/** True when err is a refusal of one of the given types (any type when none are given). */
export function isProblem<T extends ProblemType>(err: unknown, ...types: T[]): err is ProblemError & { problem: Problem & { type: T } } {
  if (!(err instanceof ProblemError) || !err.problem) return false;
  return types.length === 0 || (types as ProblemType[]).includes(err.problem.type);
}

/** The SDK gave up waiting: the deadline passed with no answer, or the caller cancelled. */
export class GaveUpError extends Error {
  override readonly name = "GaveUpError";
  constructor(
    message: string,
    /** The last failure: a NetworkError or a non-final ProblemError (undefined when nothing was sent). */
    readonly last: unknown,
    readonly attempts: number,
  ) {
    super(message);
  }
}

/** Reads a problem document from an answer's body, if it is one. */
export function parseProblem(contentType: string | undefined, body: string): Problem | undefined {
  if (!contentType || !contentType.toLowerCase().startsWith("application/problem+json")) return undefined;
  try {
    const p = JSON.parse(body) as Problem;
    return typeof p === "object" && p !== null && typeof p.type === "string" ? p : undefined;
  } catch {
    return undefined;
  }
}
