// client_bad.ts - must NOT type-check against the generated types
// (tests/openapi/run.py): a member the created payment does not have, a
// query parameter GET /v1/payments does not take, a problem type the
// document does not declare, and an event type a webhook endpoint cannot
// subscribe to.  It shows that the check can fail.
import createClient from "openapi-fetch";
import type { paths } from "./api";

const client = createClient<paths>({ baseUrl: "http://127.0.0.1:8080" });

export async function wrong(): Promise<string> {
  const { data, error } = await client.POST("/v1/payments", {
    params: { header: { "Idempotency-Key": "k1" } },
    body: { amount: 1250, currency: "eur" },
  });
  if (error !== undefined) {
    if (error.type === "/problems/no-such-type") {
      return "never";
    }
    throw new Error(error.title);
  }
  await client.GET("/v1/payments", { params: { query: { size: 5 } } });
  return data.identifier;
}

export async function wrongEvent(): Promise<void> {
  await client.POST("/v1/webhook_endpoints", {
    params: { header: { "Idempotency-Key": "k2" } },
    body: { url: "https://example.org/hooks", events: ["payment.refunded"] },
  });
}
