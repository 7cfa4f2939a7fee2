// What the compiler checks for a page: the problem types are a closed
// union from api/openapi.yaml, and bodies and answers are the schema's.
// A line marked @ts-expect-error that compiles fails the build.

import assert from "node:assert/strict";
import { test } from "node:test";
import { type Cart, type Order, type ProblemType, ProblemError, isProblem } from "../src/index.js";

test("the types follow the contract", () => {
  const slug: ProblemType = "out-of-stock";
  // @ts-expect-error a slug the service never sends
  const wrong: ProblemType = "out-of-stok";

  const cart: Cart = { merchant_id: "1", items: [{ dish_id: "2", qty: 1 }], address: { name: "n", phone: "p", detail: "d" } };
  // @ts-expect-error qty is a number
  const badCart: Cart = { merchant_id: "1", items: [{ dish_id: "2", qty: "1" }], address: { name: "n", phone: "p", detail: "d" } };

  const status: Order["status"] = "PENDING_PAYMENT";
  // @ts-expect-error not a status of the state table
  const badStatus: Order["status"] = "SHIPPED";

  const err: unknown = new ProblemError(409, { type: "out-of-stock", title: "t", status: 409, detail: "d", dishes: [] }, true, 1);
  if (isProblem(err, "out-of-stock", "quote-changed")) {
    // Narrowed: only the two types remain.
    const t: "out-of-stock" | "quote-changed" = err.problem.type;
    assert.equal(t, "out-of-stock");
  } else {
    assert.fail("isProblem did not recognise the problem");
  }
  assert.equal(isProblem(err, "quote-changed"), false);
  void [slug, wrong, cart, badCart, status, badStatus];
});
