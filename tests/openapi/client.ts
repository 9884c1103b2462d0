// client.ts - a client of the sample payments API written against the
// types openapi-typescript generates from its /openapi.json (tests/openapi/
// run.py type-checks it with tsc --strict; it is not run).  It creates a
// payment, reads its id, lists payments with limit and handles a 402; it
// registers a webhook endpoint and reads a payment.succeeded event as a
// receiver gets it (the document's webhooks).
import createClient from "openapi-fetch";
import type { paths, webhooks } from "./api";

const client = createClient<paths>({
  baseUrl: "http://127.0.0.1:8080",
  headers: { Authorization: "Bearer sk_test" },
});

export async function createAndList(): Promise<string | undefined> {
  const { data, error, response } = await client.POST("/v1/payments", {
    params: { header: { "Idempotency-Key": crypto.randomUUID() } },
    body: { amount: 1250, currency: "eur", metadata: { order: "42" } },
  });
  if (error !== undefined) {
    // The card was declined: a stored answer, the problem's type says so
    // (a type URI the document does not declare would not compile).
    if (response.status === 402 && error.type === "/problems/payment-declined") {
      console.log("declined:", error.title, error.detail ?? "");
      return undefined;
    }
    throw new Error(`${error.status} ${error.type}: ${error.title}`);
  }
  const id: string = data.id;
  const amount: number = data.amount;
  const where: string | null = response.headers.get("Location");
  console.log("created", id, amount, data.status, where);

  const page = await client.GET("/v1/payments", {
    params: { query: { limit: 5 } },
  });
  if (page.data === undefined) {
    throw new Error(page.error.title);
  }
  for (const p of page.data.data) {
    console.log(p.id, p.amount, p.currency, p.description ?? "-");
  }
  if (page.data.has_more) {
    console.log("more after", page.data.data[page.data.data.length - 1]?.id);
  }
  return id;
}

// A receiver's view of an event (after checking its signature).
type PaymentSucceeded =
  webhooks["payment.succeeded"]["post"]["requestBody"]["content"]["application/json"];

export function onPaymentSucceeded(ev: PaymentSucceeded): string {
  const type: "payment.succeeded" = ev.type;
  return `${ev.id} ${type} ${ev.data.id} ${ev.data.amount} ${ev.created}`;
}

export async function registerEndpoint(): Promise<string> {
  const { data, error } = await client.POST("/v1/webhook_endpoints", {
    params: { header: { "Idempotency-Key": crypto.randomUUID() } },
    body: { url: "https://example.org/hooks", events: ["payment.succeeded", "refund.created"] },
  });
  if (error !== undefined) {
    throw new Error(`${error.status} ${error.type}: ${error.title}`);
  }
  const secret: string = data.secret;
  const id: number = data.id;
  await client.DELETE("/v1/webhook_endpoints/{id}", {
    params: { path: { id: String(id) } },
  });
  return secret;
}
